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
            track(
                try ModelContainer(
                    for: Schema(Self.models),
                    configurations: ModelConfiguration(url: URL(fileURLWithPath: directory.file(name + ".store")))))
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
            // A's label: its values go on top, and the memos of both join
            // (a merge re-points relationships), on both devices.
            let expected = [
                "folder F: m1,m2", "label L1 (blue): m1", "memo m1 in F labels L1", "memo m2 in F labels ",
                "memo m3 in - labels ",
            ]
            XCTAssertEqual(try graphDump(a), expected)
            XCTAssertEqual(try graphDump(b), expected)
            XCTAssertEqual(syncA.status.serverPosition, 2)
            XCTAssertEqual(syncB.status.pendingChanges, 0)
            // The upload is no save: the history holds only what sync applied.
            let history = try ModelContext(a).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            XCTAssertEqual(history.map(\.author), [nil, "sync"])
            XCTAssertEqual(try a.checkIntegrity(), [])
            XCTAssertEqual(try b.checkIntegrity(), [])
        }
    }

    /// Zones whose server history was trimmed into a snapshot.
    final class SyncTrimTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Folder.self, Memo.self, Label.self] }

        func testDevicesBehindATrimAndNewDevicesRestoreTheSnapshot() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let onA = ModelContext(a)
            let work = Folder(name: "work")
            let home = Folder(name: "home")
            let urgent = Label(name: "urgent")
            for model in [work, home] { onA.insert(model) }
            onA.insert(urgent)
            for text in ["w1", "w2", "w3"] {
                let memo = Memo(text: text, folder: work)
                onA.insert(memo)
                if text != "w3" { memo.labels = [urgent] }
            }
            onA.insert(Memo(text: "h1", folder: home))
            try onA.save()
            try await syncA.syncNow()
            try await syncB.syncNow()

            // While B is away, A renames, deletes, moves, adds; then trims.
            let memos = try onA.fetch(FetchDescriptor<Memo>(sortBy: [SortDescriptor(\.text)]))
            memos.first { $0.text == "w1" }?.text = "w1 renamed"
            onA.delete(memos.first { $0.text == "w2" }!)
            onA.delete(home)  // takes h1 with it (cascade)
            onA.insert(Memo(text: "w4", folder: work))
            try onA.save()
            let through = try await syncA.trimServerHistory()
            XCTAssertEqual(through, 2)
            XCTAssertEqual(
                try server().psql(
                    "SELECT count(*) FROM strata_sync.changes WHERE zone = '\(zone)' AND length(payload) > 0"), "0\n")

            // B changed a memo meanwhile and made a label; it restores the
            // snapshot, keeps its change, and pushes it.
            let onB = ModelContext(b)
            try onB.fetch(FetchDescriptor<Memo>()).first { $0.text == "w3" }?.labels = [Label(name: "later")]
            try onB.save()
            try await syncB.syncNow()
            XCTAssertEqual(syncB.status.serverPosition, 3)
            try await syncA.syncNow()
            let expected = [
                "folder work: w1 renamed,w3,w4", "label later: w3", "label urgent: w1 renamed",
                "memo w1 renamed in work labels urgent", "memo w3 in work labels later", "memo w4 in work labels ",
            ]
            XCTAssertEqual(try graphDump(a), expected)
            XCTAssertEqual(try graphDump(b), expected)

            // A new device: the snapshot, then the change after it.
            let (c, syncC) = try device("c", zone: zone)
            try await syncC.syncNow()
            XCTAssertEqual(syncC.status.serverPosition, 3)
            XCTAssertEqual(try graphDump(c), expected)
            for container in [a, b, c] { XCTAssertEqual(try container.checkIntegrity(), []) }

            // A trim where the zone is trimmed already does nothing; after
            // a later change it trims further.
            let again = try await syncB.trimServerHistory()
            XCTAssertEqual(again, 3)
            let onC = ModelContext(c)
            onC.insert(Memo(text: "c1"))
            try onC.save()
            let further = try await syncC.trimServerHistory()
            XCTAssertEqual(further, 4)
            try await syncA.syncNow()
            XCTAssertEqual(try graphDump(a), try graphDump(c))
        }
    }

    extension SyncTrimTests {
        /// With automatic trimming, a device trims the zone once it holds
        /// more changes than the rule allows since the last trim; a new
        /// device restores the snapshot and holds every model.
        func testAutomaticTrimmingKeepsTheServersHistoryShort() async throws {
            let zone = "zone-\(UUID())"
            var configuration = try configuration(zone: zone)
            configuration.automaticTrimming = try SyncConfiguration.AutomaticTrimming(afterChanges: 5)
            let url = URL(fileURLWithPath: directory.file("a.store"))
            let a = track(try ModelContainer(for: Schema(Self.models), configurations: ModelConfiguration(url: url)))
            let syncA = try SyncEngine(container: a, configuration: configuration)
            engines.append(syncA)
            let context = ModelContext(a)
            var trims: [Int] = []
            for index in 1...12 {
                context.insert(Folder(name: "f\(index)"))
                try context.save()
                try await syncA.syncNow()
                let text = try server().psql("SELECT trimmed FROM strata_sync.zones WHERE zone = '\(zone)'")
                trims.append(Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1)
            }
            // Trimmed after the 6th change and after the 12th.
            XCTAssertEqual(trims, [0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6, 12])
            let (b, syncB) = try device("b", zone: zone)
            try await syncB.syncNow()
            XCTAssertEqual(try ModelContext(b).fetchCount(FetchDescriptor<Folder>()), 12)

            XCTAssertThrowsError(try SyncConfiguration.AutomaticTrimming(afterChanges: 0)) { error in
                XCTAssertEqual((error as? SyncError)?.code, .configuration)
            }
        }

        func testAModelWithTwoIdentifiersSurvivesARestore() async throws {
            let zone = "zone-\(UUID())"
            let (a, _) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            // B pushes its label between A's prepare and A's push: A pulls
            // it behind its own prepared insert, so each device's label
            // has both identifiers, its own first.
            let hooked = PushHook(PostgresZoneServer(configuration: try configuration(zone: zone))) {
                try? await syncB.syncNow()
            }
            let syncA = try SyncEngine(container: a, configuration: try configuration(zone: zone), server: hooked)
            engines.append(syncA)
            for container in [a, b] {
                let context = ModelContext(container)
                context.insert(Label(name: "dup", color: container === a ? "red" : "blue"))
                try context.save()
            }
            try await syncA.syncNow()
            try await syncB.syncNow()
            XCTAssertEqual(try graphDump(a), ["label dup (red): "])
            XCTAssertEqual(try graphDump(b), try graphDump(a))

            // A trims past B's position; B restores A's snapshot, which
            // names the label by A's first identifier.
            let onA = ModelContext(a)
            onA.insert(Memo(text: "after"))
            try onA.save()
            _ = try await syncA.trimServerHistory()
            try await syncB.syncNow()
            XCTAssertEqual(try graphDump(b), ["label dup (red): ", "memo after in - labels "])
            XCTAssertEqual(try b.checkIntegrity(), [])
        }
    }

    /// A server that runs a hook before it passes on the push of each
    /// given number (0: the first push through it), once.
    final class PushHook: ForwardingServer, @unchecked Sendable {
        private let hooks: NumberedHooks

        init(_ base: any ZoneServer, before hooks: [Int: @Sendable () async -> Void]) {
            self.hooks = NumberedHooks(hooks)
            super.init(base)
        }

        convenience init(_ base: any ZoneServer, hook: @escaping @Sendable () async -> Void) {
            self.init(base, before: [0: hook])
        }

        override func push(
            zone: String, device: [UInt8], token: Int64, expected: Int64, schema: String, payload: [UInt8]
        ) async throws(SyncError) -> PushOutcome {
            await hooks.runNext()
            return try await base.push(
                zone: zone, device: device, token: token, expected: expected, schema: schema, payload: payload)
        }
    }

    /// A server that runs a hook before it passes on the pull of each
    /// given number (0: the first pull through it), once.
    final class PullHook: ForwardingServer, @unchecked Sendable {
        private let hooks: NumberedHooks

        init(_ base: any ZoneServer, before hooks: [Int: @Sendable () async -> Void]) {
            self.hooks = NumberedHooks(hooks)
            super.init(base)
        }

        override func pull(zone: String, after: Int64, limit: Int) async throws(SyncError) -> [ServerChange] {
            await hooks.runNext()
            return try await base.pull(zone: zone, after: after, limit: limit)
        }
    }

    /// Hooks by the number of the call they run before (0: the first), each
    /// once.
    final class NumberedHooks: @unchecked Sendable {
        // Guarded by `lock`.
        private var hooks: [Int: @Sendable () async -> Void]
        private var calls = 0
        private let lock = NSLock()

        init(_ hooks: [Int: @Sendable () async -> Void]) { self.hooks = hooks }

        /// Counts a call, and runs its hook if it has one.
        func runNext() async {
            let hook = lock.withLock {
                defer { calls += 1 }
                return hooks.removeValue(forKey: calls)
            }
            if let hook { await hook() }
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
            // Every change pulled once, but the one at the position where
            // it broke: read again to check that the zone still holds it.
            XCTAssertEqual(cutting.pulled, Int(chunks) + 1, "no change pulled twice")
            let onB = ModelContext(b)
            XCTAssertEqual(try onB.fetchCount(FetchDescriptor<Note>()), count)
            let last = "note \(count - 1)"
            XCTAssertEqual(
                try onB.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.title == last })).first?.stars, (count - 1) % 5)
            XCTAssertEqual(
                try onB.fetchCount(FetchDescriptor<Note>(predicate: #Predicate { $0.stars == 3 })),
                (0..<count).filter { $0 % 5 == 3 }.count)
            XCTAssertEqual(try b.checkIntegrity(), [])

            // A trims the zone: a new device restores the snapshot (100
            // parts), its download broken after 40 parts and resumed.
            let through = try await syncA.trimServerHistory()
            XCTAssertEqual(through, chunks)
            let (d, _) = try device("d", zone: zone)
            let parts = CuttingPulls(
                PostgresZoneServer(configuration: try configuration(zone: zone)), batch: 256, partsBreakAfter: 40)
            let syncD = try SyncEngine(container: d, configuration: try configuration(zone: zone), server: parts)
            engines.append(syncD)
            do {
                try await syncD.syncNow()
                XCTFail("the download should break")
            } catch {
                XCTAssertEqual(error.code, .unreachable)
            }
            XCTAssertEqual(syncD.status.serverPosition, 0, "nothing applied before the whole snapshot is here")
            XCTAssertEqual(try ModelContext(d).fetchCount(FetchDescriptor<Note>()), 0)
            try await syncD.syncNow()
            XCTAssertEqual(parts.partsPulled, Int(chunks), "every part downloaded once")
            XCTAssertEqual(parts.pulled, 0, "no trimmed change pulled")
            XCTAssertEqual(syncD.status.serverPosition, chunks)
            XCTAssertEqual(try ModelContext(d).fetchCount(FetchDescriptor<Note>()), count)
            XCTAssertEqual(
                try ModelContext(d).fetchCount(FetchDescriptor<Note>(predicate: #Predicate { $0.stars == 3 })),
                (0..<count).filter { $0 % 5 == 3 }.count)
            XCTAssertEqual(try d.checkIntegrity(), [])
            _ = a
        }

        /// A snapshot that another device's trim replaces while a device
        /// downloads it ends early. The device restores none of it: a part
        /// of it would delete the models of the parts missing, with this
        /// device's changes to them not pushed yet. The next round
        /// restores the new snapshot, and the changes are pushed.
        func testASnapshotReplacedWhileItDownloadsIsNotRestoredInPart() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a-replaced", zone: zone)
            let (d, first) = try device("d-replaced", zone: zone)
            let onA = ModelContext(a)
            for index in 0..<2500 { onA.insert(Note(title: "n\(index)")) }
            try onA.save()
            try await syncA.syncNow()
            try await first.syncNow()
            await first.stop()
            let onD = ModelContext(d)
            for note in try onD.fetch(FetchDescriptor<Note>()) { note.stars = 5 }
            try onD.save()
            for title in ["late 1", "late 2"] {
                onA.insert(Note(title: title))
                try onA.save()
                try await syncA.syncNow()
                if title == "late 1" {
                    let through = try await syncA.trimServerHistory()
                    XCTAssertEqual(through, 2)
                }
            }
            let server = MidDownload(PostgresZoneServer(configuration: try configuration(zone: zone))) {
                let through = try await syncA.trimServerHistory()
                XCTAssertEqual(through, 3)
            }
            let syncD = try SyncEngine(container: d, configuration: try configuration(zone: zone), server: server)
            engines.append(syncD)
            do {
                try await syncD.syncNow()
                XCTFail("the first round should find the snapshot replaced")
            } catch {
                XCTAssertEqual(error.code, .server, "\(error)")
            }
            XCTAssertEqual(try onD.fetchCount(FetchDescriptor<Note>(predicate: #Predicate { $0.stars == 5 })), 2500)
            try await syncD.syncNow()
            try await syncA.syncNow()
            for container in [a, d] {
                let context = ModelContext(container)
                XCTAssertEqual(try context.fetchCount(FetchDescriptor<Note>()), 2502)
                XCTAssertEqual(try context.fetchCount(FetchDescriptor<Note>(predicate: #Predicate { $0.stars == 5 })), 2500)
            }
        }
    }

    /// A server that runs `meanwhile` once, when a device first asks for
    /// part 1 of a snapshot, before passing the request on.
    final class MidDownload: ForwardingServer, @unchecked Sendable {
        // Guarded by `lock`.
        private var ran = false
        private let lock = NSLock()
        private let meanwhile: @Sendable () async throws -> Void

        init(_ base: any ZoneServer, meanwhile: @escaping @Sendable () async throws -> Void) {
            self.meanwhile = meanwhile
            super.init(base)
        }

        override func snapshotPart(zone: String, through: Int64, part: Int) async throws(SyncError) -> [UInt8]? {
            let first = lock.withLock {
                defer { ran = ran || part == 1 }
                return part == 1 && !ran
            }
            if first {
                do {
                    try await meanwhile()
                } catch {
                    throw SyncError(.server, "the trim beside the download failed: \(error)")
                }
            }
            return try await base.snapshotPart(zone: zone, through: through, part: part)
        }
    }

    /// A server whose pulls return at most `batch` changes, each pull after
    /// `delay`, and break after `breakAfter` pulls (once); it counts the
    /// changes it handed out.
    final class CuttingPulls: ForwardingServer, @unchecked Sendable {
        let batch: Int
        // Guarded by `lock`.
        private var calls = 0
        private var broke = false
        private var handed = 0
        private var partCalls = 0
        private var partsHanded = 0
        private let breakAfter: Int
        private let partsBreakAfter: Int
        private let delay: Duration
        private let lock = NSLock()

        /// `partsBreakAfter`: snapshot parts handed out before one breaks.
        init(_ base: any ZoneServer, batch: Int, breakAfter: Int = .max, partsBreakAfter: Int = .max, delay: Duration = .zero) {
            self.batch = batch
            self.breakAfter = breakAfter
            self.partsBreakAfter = partsBreakAfter
            self.delay = delay
            super.init(base)
        }

        var pulled: Int { lock.withLock { handed } }
        var partsPulled: Int { lock.withLock { partsHanded } }

        override func snapshotPart(zone: String, through: Int64, part: Int) async throws(SyncError) -> [UInt8]? {
            let breaks = lock.withLock {
                partCalls += 1
                return partCalls - 1 == partsBreakAfter
            }
            if breaks { throw SyncError(.unreachable, "the connection broke") }
            let payload = try await base.snapshotPart(zone: zone, through: through, part: part)
            if payload != nil { lock.withLock { partsHanded += 1 } }
            return payload
        }
        override func pull(zone: String, after: Int64, limit: Int) async throws(SyncError) -> [ServerChange] {
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
    }
#endif
