#if Sync
    import Foundation
    import Strata
    @testable import StrataSync
    import StrataTesting
    import XCTest

    /// Stores that held models before they joined a zone.
    final class SyncUploadTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Folder.self, Memo.self, Label.self] }

        /// A store at `name` that is not syncing yet.
        func localStore(_ name: String) throws -> ModelContainer {
            try ModelContainer(
                for: Schema(Self.models),
                configurations: ModelConfiguration(url: URL(fileURLWithPath: directory.file(name + ".store"))))
        }

        func testModelsSavedBeforeJoiningAreUploaded() async throws {
            let zone = "zone-\(UUID())"
            do {
                let context = ModelContext(try localStore("a"))
                let folder = Folder(name: "F")
                let label = Label(name: "L1")
                context.insert(folder)
                context.insert(label)
                for text in ["m1", "m2"] {
                    let memo = Memo(text: text, folder: folder)
                    context.insert(memo)
                    if text == "m1" { memo.labels = [label] }
                }
                try context.save()
            }
            do {
                // The other device's label collides with A's on the unique
                // name.
                let context = ModelContext(try localStore("b"))
                context.insert(Label(name: "L1", color: "blue"))
                context.insert(Memo(text: "m3"))
                try context.save()
            }
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            XCTAssertEqual(syncA.status.pendingChanges, 1, "the models of A, as one upload")
            try await syncA.syncNow()
            try await syncB.syncNow()
            try await syncA.syncNow()
            // B's upload comes later in the zone's order and merges into
            // A's label as SwiftData's upsert does: its values, its memos
            // (none) included, replace A's on both devices.
            let expected = [
                "folder F: m1,m2", "label L1 (blue): ", "memo m1 in F labels ", "memo m2 in F labels ",
                "memo m3 in - labels ",
            ]
            XCTAssertEqual(try graphDump(a), expected)
            XCTAssertEqual(try graphDump(b), expected)
            XCTAssertEqual(syncA.status.serverPosition, 2)
            XCTAssertEqual(syncB.status.pendingChanges, 0)
            // The upload is no save: the history holds only what sync applied.
            let history = try ModelContext(a).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            XCTAssertEqual(history.map(\.author), [nil, "sync"])
            try a.checkIntegrity()
            try b.checkIntegrity()
        }
    }

    /// A new device catching up on a large zone.
    final class SyncInitialSyncTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Note.self] }

        /// Models of the test (`STRATA_SYNC_INITIAL`, default 100 000).
        let count = Int(ProcessInfo.processInfo.environment["STRATA_SYNC_INITIAL"] ?? "") ?? 100_000

        func testANewDeviceCatchesUpOnALargeZoneAndResumesAfterAnInterruption() async throws {
            let zone = "zone-\(UUID())"
            do {
                let url = URL(fileURLWithPath: directory.file("a.store"))
                let context = ModelContext(try ModelContainer(for: Note.self, configurations: ModelConfiguration(url: url)))
                for index in 0..<count {
                    context.insert(Note(title: "note \(index)", stars: index % 5))
                    if index % 10_000 == 9_999 { try context.save() }
                }
                try context.save()
            }
            let (a, syncA) = try device("a", zone: zone)
            try await syncA.syncNow()
            let chunks = Int64((count + SyncReplica.uploadChunk - 1) / SyncReplica.uploadChunk)
            XCTAssertEqual(syncA.status.serverPosition, chunks)

            // B's pull breaks after 40 changes, in batches of 20.
            let (b, _) = try device("b", zone: zone)
            let cutting = CuttingPulls(PostgresZoneServer(configuration: try configuration(zone: zone)), batch: 20, breakAfter: 2)
            let syncB = try SyncEngine(container: b, configuration: try configuration(zone: zone), server: cutting)
            engines.append(syncB)
            do {
                try await syncB.syncNow()
                XCTFail("the pull should break")
            } catch {
                XCTAssertEqual(error.code, .unreachable)
            }
            XCTAssertEqual(syncB.status.serverPosition, 40, "applied up to the break")
            XCTAssertEqual(syncB.status.serverHead, chunks, "the progress: 40 of the zone's head")
            XCTAssertEqual(try ModelContext(b).fetchCount(FetchDescriptor<Note>()), 40 * SyncReplica.uploadChunk)

            // Resumed where it broke: every change pulled once.
            try await syncB.syncNow()
            XCTAssertEqual(syncB.status.serverPosition, chunks)
            XCTAssertEqual(cutting.pulled, Int(chunks), "no change pulled twice")
            let onB = ModelContext(b)
            XCTAssertEqual(try onB.fetchCount(FetchDescriptor<Note>()), count)
            let last = "note \(count - 1)"
            XCTAssertEqual(
                try onB.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.title == last })).first?.stars, (count - 1) % 5)
            XCTAssertEqual(
                try onB.fetchCount(FetchDescriptor<Note>(predicate: #Predicate { $0.stars == 3 })),
                (0..<count).filter { $0 % 5 == 3 }.count)
            try b.checkIntegrity()
            _ = a
        }
    }

    /// A server whose pulls return at most `batch` changes, each pull after
    /// `delay`, and break after `breakAfter` pulls (once); it counts the
    /// changes it handed out.
    final class CuttingPulls: ZoneServer, @unchecked Sendable {
        let base: any ZoneServer
        let batch: Int
        // Guarded by `lock`.
        private var calls = 0
        private var broke = false
        private var handed = 0
        private let breakAfter: Int
        private let delay: Duration
        private let lock = NSLock()

        init(_ base: any ZoneServer, batch: Int, breakAfter: Int = .max, delay: Duration = .zero) {
            self.base = base
            self.batch = batch
            self.breakAfter = breakAfter
            self.delay = delay
        }

        var pulled: Int { lock.withLock { handed } }

        func prepare() async throws(SyncError) { try await base.prepare() }
        func register(zone: String, hash: String, description: String, accept: @Sendable ([String]) throws -> Void)
            async throws(SyncError) -> [String]
        {
            try await base.register(zone: zone, hash: hash, description: description, accept: accept)
        }
        func push(zone: String, device: [UInt8], token: Int64, expected: Int64, schema: String, payload: [UInt8])
            async throws(SyncError) -> PushOutcome
        {
            try await base.push(
                zone: zone, device: device, token: token, expected: expected, schema: schema, payload: payload)
        }
        func head(zone: String) async throws(SyncError) -> Int64 { try await base.head(zone: zone) }
        func pull(zone: String, after: Int64, limit: Int) async throws(SyncError) -> [ServerChange] {
            let breaks = lock.withLock {
                calls += 1
                if calls > breakAfter && !broke {
                    broke = true
                    return true
                }
                return false
            }
            if breaks { throw SyncError(.unreachable, "the connection broke") }
            if delay > .zero { try? await Task.sleep(for: delay) }
            let changes = try await base.pull(zone: zone, after: after, limit: min(limit, batch))
            lock.withLock { handed += changes.count }
            return changes
        }
        func listen(zone: String, wake: @escaping @Sendable () -> Void) async throws(SyncError) {
            try await base.listen(zone: zone, wake: wake)
        }
        func close() async { await base.close() }
    }
#endif
