#if Sync
    import Foundation
    import Strata
    import StrataEngine
    @testable import StrataSync
    import StrataTesting
    import XCTest
    import Logging
    import ServiceLifecycle

    @Model
    final class Note {
        var title: String
        var body: String = ""
        var stars: Int = 0
        var due: Date?

        init(title: String, body: String = "", stars: Int = 0, due: Date? = nil) {
            self.title = title
            self.body = body
            self.stars = stars
            self.due = due
        }
    }

    /// A model of a second store (``SyncTests/testEachStoreOfAContainerSyncsWithAZoneOfItsOwn()``).
    @Model
    final class Draft {
        var text: String
        init(text: String) { self.text = text }
    }

    /// A test class with a PostgreSQL server of its own (made in the
    /// class's setUp, removed in its tearDown); each test uses zones of its
    /// own, and devices whose stores live in a directory of the test's.
    class SyncTestCase: XCTestCase {
        nonisolated(unsafe) static var clusters: [ObjectIdentifier: PostgresCluster] = [:]
        nonisolated(unsafe) static var failures: [ObjectIdentifier: String] = [:]
        var directory: TemporaryDirectory!
        var engines: [SyncEngine] = []

        /// The model types of the devices' containers.
        class var models: [any PersistentModel.Type] { [] }
        /// Whether the class's server takes TCP logins over TLS only.
        class var tls: Bool { false }

        override class func setUp() {
            super.setUp()
            do {
                clusters[ObjectIdentifier(self)] = try PostgresCluster(tls: tls)
            } catch {
                // Reported by every test: a sync test fails, never skips,
                // without its server.
                failures[ObjectIdentifier(self)] = "\(error)"
            }
        }

        override class func tearDown() {
            clusters.removeValue(forKey: ObjectIdentifier(self))?.destroy()
            super.tearDown()
        }

        /// The classes whose server has its layout installed.
        nonisolated(unsafe) static var installed: Set<ObjectIdentifier> = []

        override func setUp() async throws {
            directory = TemporaryDirectory(prefix: "strata-sync")
            // As an operator does, once per server: devices create nothing.
            if !Self.installed.contains(ObjectIdentifier(type(of: self))), (try? server()) != nil {
                _ = try await SyncServer(configuration: try configuration(zone: "install")).install()
                Self.installed.insert(ObjectIdentifier(type(of: self)))
            }
        }

        override func tearDown() async throws {
            for engine in engines { await engine.stop() }
            engines = []
            checkStores()
            try? FileManager.default.removeItem(atPath: directory.path)
        }

        /// The stores the tear-down checks with `checkIntegrity()`: every
        /// device's, and those a test passes to ``track(_:)``; the last
        /// container on each file, held weakly so that a test can close a
        /// store and open it again with another schema.
        private var tracked: [(url: URL, schema: Schema, container: WeakContainer)] = []

        /// A container the test may let go.
        struct WeakContainer {
            weak var container: ModelContainer?
        }

        /// Adds `container` to the stores the tear-down checks.
        @discardableResult func track(_ container: ModelContainer) -> ModelContainer {
            // A store of several is opened again with its own schema.
            for configuration in container.orderedConfigurations {
                let schema = container.orderedConfigurations.count > 1 ? configuration.schema : nil
                tracked.append((configuration.url, schema ?? container.schema, WeakContainer(container: container)))
            }
            return container
        }

        /// The tear-down check, as the object layer's suites have it: the
        /// object layer's integrity check (records, indexes, unique
        /// constraints, relationships) of each tracked store once its
        /// engine has stopped (a store the test closed is opened again
        /// read-only with the schema it was last opened with), then the
        /// engine's check (pages, trees, counts) of every store file left
        /// in the test's directory, those of device processes included. A
        /// problem fails the test.
        private func checkStores() {
            var latest: [URL: (schema: Schema, container: WeakContainer)] = [:]
            var order: [URL] = []
            for entry in tracked {
                if latest[entry.url] == nil { order.append(entry.url) }
                latest[entry.url] = (entry.schema, entry.container)
            }
            tracked = []
            for url in order {
                guard let entry = latest[url] else { continue }
                do {
                    let container =
                        try entry.container.container
                        ?? ModelContainer(for: entry.schema, configurations: ModelConfiguration(url: url, allowsSave: false))
                    let problems = try container.checkIntegrity()
                    if !problems.isEmpty {
                        XCTFail(
                            "tear-down: checkIntegrity() of \(url.lastPathComponent) found \(problems.count) problem(s):\n"
                                + problems.prefix(20).map { "  \($0)" }.joined(separator: "\n"))
                    }
                } catch {
                    XCTFail("tear-down: checkIntegrity() of \(url.lastPathComponent) threw \(error)")
                }
            }
            let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            for file in files.sorted() where file.hasSuffix(".store") {
                do {
                    let database = try Database.open(
                        path: directory.file(file), options: DatabaseOptions(readOnly: true))
                    defer { try? database.close() }
                    let report = try database.check()
                    if !report.isHealthy { XCTFail("tear-down: the engine check of \(file) found:\n\(report)") }
                } catch {
                    XCTFail("tear-down: the engine check of \(file) threw \(error)")
                }
            }
        }

        func server() throws -> PostgresCluster {
            guard let cluster = Self.clusters[ObjectIdentifier(type(of: self))] else {
                let reason = Self.failures[ObjectIdentifier(type(of: self))] ?? "not started"
                XCTFail("the PostgreSQL test server did not start: \(reason)")
                throw PostgresCluster.Failure(description: reason)
            }
            return cluster
        }

        /// A device: a store of its own and a sync engine for `zone`,
        /// logging in as `user` (default: the superuser). `schema` replaces
        /// the class's ``models``.
        func device(
            _ name: String, zone: String, poll: Duration = .seconds(60), schema: Schema? = nil, user: String? = nil
        ) throws -> (ModelContainer, SyncEngine) {
            let url = URL(fileURLWithPath: directory.file(name + ".store"))
            let container = try ModelContainer(
                for: schema ?? Schema(Self.models), configurations: ModelConfiguration(url: url))
            let engine = try SyncEngine(
                container: container, configuration: configuration(zone: zone, poll: poll, user: user))
            engines.append(engine)
            return (track(container), engine)
        }

        /// The first status of `engine`'s status stream that satisfies
        /// `condition`; fails after 30 s.
        @discardableResult
        func status(of engine: SyncEngine, where condition: @escaping @Sendable (SyncStatus) -> Bool) async throws
            -> SyncStatus
        {
            try await withThrowingTaskGroup(of: SyncStatus?.self) { group in
                group.addTask {
                    for await status in engine.statusUpdates where condition(status) { return status }
                    return nil
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(30))
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                guard let first else { throw PostgresCluster.Failure(description: "timed out waiting for a status") }
                return first
            }
        }

        /// The zone's head on the server.
        func head(_ zone: String) throws -> Int {
            let text = try server().psql("SELECT coalesce(max(head), 0) FROM strata_sync.zones WHERE zone = '\(zone)'")
            return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }

        /// Puts a change no device can read into `zone`, after its head.
        func pushGarbage(_ zone: String) throws { try pushPayload(zone, [0xde, 0xad, 0xbe, 0xef]) }

        /// Puts `payload` into `zone` after its head, as a change of a
        /// device no store is.
        func pushPayload(_ zone: String, _ payload: [UInt8]) throws {
            let hex = payload.map { String(format: "%02x", $0) }.joined()
            try server().psql(
                """
                WITH z AS (UPDATE strata_sync.zones SET head = head + 1 WHERE zone = '\(zone)' RETURNING head)
                INSERT INTO strata_sync.changes (zone, seq, device, local_token, schema_hash, payload)
                SELECT '\(zone)', z.head, gen_random_uuid(), 1,
                    (SELECT hash FROM strata_sync.schemas WHERE zone = '\(zone)' LIMIT 1), '\\x\(hex)'::bytea FROM z
                """)
        }

        /// The change set of `zone`'s change `seq`, as the server holds it.
        func serverChange(_ zone: String, seq: Int) throws -> SyncChangeSet {
            let hex = try server().psql(
                "SELECT encode(payload, 'hex') FROM strata_sync.changes WHERE zone = '\(zone)' AND seq = \(seq)"
            ).trimmingCharacters(in: .whitespacesAndNewlines)
            var bytes: [UInt8] = []
            var index = hex.startIndex
            while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
                bytes.append(try XCTUnwrap(UInt8(hex[index..<next], radix: 16)))
                index = next
            }
            return try SyncChangeSet.decode(bytes)
        }

        /// The test server's configuration for `zone`, over its Unix socket;
        /// `user` (default: the superuser) logs in with no password.
        /// Requests time out after 20 s: a round that hangs fails the test
        /// instead of holding the run.
        func configuration(zone: String, poll: Duration = .seconds(60), user: String? = nil) throws -> SyncConfiguration {
            let cluster = try server()
            var configuration = try SyncConfiguration(
                host: nil, port: cluster.port, socketDirectory: cluster.socketDirectory, user: user ?? cluster.user,
                database: cluster.database, tls: .disable, zone: zone, pollInterval: poll)
            configuration.requestTimeout = .seconds(20)
            return configuration
        }
    }

    final class SyncTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Note.self] }

        /// A container of two stores: each syncs with a zone of its own,
        /// through an engine of its own, from the app's contexts of the
        /// whole container; an engine that names no store, or a store the
        /// container lacks, is refused with the stores' names.
        func testEachStoreOfAContainerSyncsWithAZoneOfItsOwn() async throws {
            let notesZone = "zone-\(UUID())"
            let draftsZone = "zone-\(UUID())"
            func device(_ name: String) throws -> (ModelContainer, notes: SyncEngine, drafts: SyncEngine) {
                let container = try ModelContainer(
                    for: Schema([Note.self, Draft.self]),
                    configurations: [
                        ModelConfiguration(
                            "notes", schema: Schema([Note.self]), url: URL(fileURLWithPath: directory.file(name + "-notes"))),
                        ModelConfiguration(
                            "drafts", schema: Schema([Draft.self]), url: URL(fileURLWithPath: directory.file(name + "-drafts"))),
                    ])
                var notes = try configuration(zone: notesZone)
                notes.store = "notes"
                var drafts = try configuration(zone: draftsZone)
                drafts.store = "drafts"
                let engines = (
                    try SyncEngine(container: container, configuration: notes),
                    try SyncEngine(container: container, configuration: drafts)
                )
                self.engines += [engines.0, engines.1]
                return (track(container), engines.0, engines.1)
            }
            let (a, notesA, draftsA) = try device("a")
            let (b, notesB, draftsB) = try device("b")
            let context = ModelContext(a)
            context.insert(Note(title: "a note"))
            context.insert(Draft(text: "a draft"))
            try context.save()
            XCTAssertEqual(notesA.status.pendingChanges, 1)
            XCTAssertEqual(draftsA.status.pendingChanges, 1)
            try await notesA.syncNow()
            try await draftsA.syncNow()
            try await notesB.syncNow()
            XCTAssertEqual(try ModelContext(b).fetch(FetchDescriptor<Note>()).map(\.title), ["a note"])
            XCTAssertEqual(try ModelContext(b).fetchCount(FetchDescriptor<Draft>()), 0, "the drafts' zone is not pulled yet")
            try await draftsB.syncNow()
            XCTAssertEqual(try ModelContext(b).fetch(FetchDescriptor<Draft>()).map(\.text), ["a draft"])
            XCTAssertEqual(try head(notesZone), 1)
            XCTAssertEqual(try head(draftsZone), 1)

            // A save of one store is pending for its engine only.
            let onB = ModelContext(b)
            onB.insert(Draft(text: "b's draft"))
            try onB.save()
            XCTAssertEqual(notesB.status.pendingChanges, 0)
            XCTAssertEqual(draftsB.status.pendingChanges, 1)

            let whole = try configuration(zone: notesZone)
            XCTAssertThrowsError(try SyncEngine(container: a, configuration: whole)) { error in
                XCTAssertEqual((error as? SyncError)?.code, .configuration)
                XCTAssertTrue("\(error)".contains("several stores (notes, drafts)"), "\(error)")
            }
            var unknown = whole
            unknown.store = "photos"
            XCTAssertThrowsError(try SyncEngine(container: a, configuration: unknown)) { error in
                XCTAssertTrue("\(error)".contains("no store named photos (its stores: notes, drafts)"), "\(error)")
            }
        }

        func notes(_ container: ModelContainer) throws -> [Note] {
            try ModelContext(container).fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
        }

        /// Sync holds the saves it has not pushed; a store that joined a zone
        /// before holds existed gets its hold when sync opens it again.
        func testSyncHoldsItsUnpushedSavesAndAStoreFromBeforeHoldsGetsItsHold() throws {
            let url = URL(fileURLWithPath: directory.file("holds.store"))
            let container = track(try ModelContainer(for: Schema([Note.self]), configurations: ModelConfiguration(url: url)))
            let context = ModelContext(container)
            context.insert(Note(title: "before joining"))
            try context.save()
            let replica = try SyncReplica(container: container)
            _ = try replica.join(zone: "z")
            XCTAssertEqual(try container.store.read { tx in try HistoryLog.heldAfter(SyncReplica.author, in: tx) }, 1)
            context.insert(Note(title: "waiting"))
            try context.save()
            try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            XCTAssertEqual(try historyTokens(of: container), [2], "the unpushed save stays")

            try container.store.write { tx in try HistoryLog.release(SyncReplica.author, in: tx) }
            _ = try SyncReplica(container: container).join(zone: "z")
            XCTAssertEqual(try container.store.read { tx in try HistoryLog.heldAfter(SyncReplica.author, in: tx) }, 1)
            try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            XCTAssertEqual(try historyTokens(of: container), [2])
        }

        func historyTokens(of container: ModelContainer) throws -> [Int64] {
            try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).map(\.token.tokenValue)
        }

        func dump(_ container: ModelContainer) throws -> [String] {
            try notes(container).map { "\($0.title)|\($0.body)|\($0.stars)|\($0.due?.timeIntervalSince1970 ?? -1)" }
        }

        /// A sync pull is a commit like any other: a live sequence on the
        /// pulling device gets exactly one new value for it.
        func testAPullGivesALiveSequenceExactlyOneNewValue() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let values = Recorder<[String]>()
            let watcher = Task.detached {
                let context = ModelContext(b)
                do {
                    let all = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)])
                    for try await notes in context.liveResults(all) { values.record(notes.map(\.title)) }
                    values.finish()
                } catch {
                    values.finish(error)
                }
            }
            defer { watcher.cancel() }
            let first = await values.wait(forCount: 1)
            XCTAssertTrue(first)
            let context = ModelContext(a)
            context.insert(Note(title: "one"))
            context.insert(Note(title: "two"))
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            let pulled = await values.wait(forCount: 2)
            XCTAssertTrue(pulled)
            try await Task.sleep(for: .milliseconds(150))
            XCTAssertEqual(values.recorded, [[], ["one", "two"]])
        }

        func testSavesOnOneDeviceAppearOnAnother() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            context.insert(Note(title: "one", body: "first", stars: 1, due: Date(timeIntervalSince1970: 1000)))
            context.insert(Note(title: "two"))
            try context.save()
            context.insert(Note(title: "three", stars: 3))
            try context.save()
            XCTAssertEqual(syncA.status.pendingChanges, 2, "each local save is pending at once")
            try await syncA.syncNow()
            XCTAssertEqual(syncA.status.pendingChanges, 0)
            XCTAssertEqual(syncA.status.serverPosition, 2, "two saves, two server changes")
            try await syncB.syncNow()
            XCTAssertEqual(try dump(b), try dump(a))
            XCTAssertEqual(try dump(b).count, 3)

            // B changes and deletes; A gets both.
            let contextB = ModelContext(b)
            let fetched = try contextB.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.title)]))
            fetched[0].body = "edited on b"
            contextB.delete(fetched[2])
            try contextB.save()
            try await syncB.syncNow()
            try await syncA.syncNow()
            XCTAssertEqual(try dump(a), ["one|edited on b|1|1000.0", "three||3|-1.0"])
            XCTAssertEqual(try dump(a), try dump(b))

            // Pulled changes are saves authored "sync", in A's history.
            let history = try ModelContext(a).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            XCTAssertEqual(history.map(\.author), [nil, nil, "sync"])
            // And they are not pushed back.
            try await syncA.syncNow()
            XCTAssertEqual(syncA.status.serverPosition, 3)
        }

        func testDeletingHistoryKeepsTheSavesNotPushedYet() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            context.insert(Note(title: "pushed"))
            try context.save()
            try await syncA.syncNow()
            context.insert(Note(title: "waiting"))
            try context.save()
            try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            // The pushed save's history is gone; the waiting one's is kept.
            let left = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            XCTAssertEqual(left.map(\.transactionIdentifier), [2])
            XCTAssertEqual(syncA.status.pendingChanges, 1, "the waiting save")
            try await syncA.syncNow()
            try await syncB.syncNow()
            XCTAssertEqual(try dump(b), ["pushed||0|-1.0", "waiting||0|-1.0"])
            // Pushed now: deleting history deletes it.
            try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            XCTAssertEqual(try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).count, 0)
        }

        func testRoundsAtOnceRunOneAfterTheOther() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            for index in 0..<30 {
                context.insert(Note(title: "n\(index)"))
                try context.save()
            }
            try await syncA.syncNow()
            // Three rounds at once, and the background loop's: each waits for
            // the one before it, so none applies a change twice.
            syncB.start()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<3 { group.addTask { try await syncB.syncNow() } }
                try await group.waitForAll()
            }
            XCTAssertEqual(try dump(b).count, 30)
            XCTAssertEqual(syncB.status.serverPosition, 30)
            XCTAssertNil(syncB.status.lastError)
        }

        func testChangesToDifferentAttributesBothSurvive() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            context.insert(Note(title: "shared", body: "original", stars: 1))
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()

            let onA = ModelContext(a)
            try onA.fetch(FetchDescriptor<Note>())[0].body = "body from a"
            try onA.save()
            let onB = ModelContext(b)
            try onB.fetch(FetchDescriptor<Note>())[0].stars = 5
            try onB.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            try await syncA.syncNow()
            XCTAssertEqual(try dump(a), ["shared|body from a|5|-1.0"])
            XCTAssertEqual(try dump(b), try dump(a))
        }

        func testTheLaterChangeInServerOrderWinsOnEveryDevice() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            context.insert(Note(title: "x"))
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()

            let onA = ModelContext(a)
            try onA.fetch(FetchDescriptor<Note>())[0].body = "a's"
            try onA.save()
            let onB = ModelContext(b)
            try onB.fetch(FetchDescriptor<Note>())[0].body = "b's"
            try onB.save()
            // A reaches the server first; B's change comes after it, so B's
            // value wins, on A too. B keeps its own value while it pulls A's.
            try await syncA.syncNow()
            try await syncB.syncNow()
            XCTAssertEqual(try dump(b), ["x|b's|0|-1.0"])
            try await syncA.syncNow()
            XCTAssertEqual(try dump(a), ["x|b's|0|-1.0"])
        }

        func testADeleteWinsOverAConcurrentUpdate() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            context.insert(Note(title: "doomed"))
            context.insert(Note(title: "kept"))
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()

            let onA = ModelContext(a)
            onA.delete(try onA.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.title == "doomed" }))[0])
            try onA.save()
            let onB = ModelContext(b)
            try onB.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.title == "doomed" }))[0].body = "late edit"
            try onB.save()
            // Either order: the delete wins.
            try await syncB.syncNow()
            try await syncA.syncNow()
            try await syncB.syncNow()
            XCTAssertEqual(try dump(a), ["kept||0|-1.0"])
            XCTAssertEqual(try dump(b), ["kept||0|-1.0"])
        }

        func testARetriedPushIsAppliedOnce() async throws {
            let zone = "zone-\(UUID())"
            let cluster = try server()
            let (a, _) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            // A's engine over a server whose first push reply is lost after
            // the server committed it.
            let configuration = try SyncConfiguration(
                host: nil, port: cluster.port, socketDirectory: cluster.socketDirectory, user: cluster.user,
                database: cluster.database, tls: .disable, zone: zone)
            let lossy = LosingReplies(PostgresZoneServer(configuration: configuration))
            let syncA = try SyncEngine(container: a, configuration: configuration, server: lossy)
            engines.append(syncA)
            let context = ModelContext(a)
            context.insert(Note(title: "once", stars: 1))
            try context.save()
            do {
                try await syncA.syncNow()
                XCTFail("the lost reply should fail the round")
            } catch {
                XCTAssertEqual(error.code, .unreachable)
            }
            XCTAssertEqual(syncA.status.pendingChanges, 1, "not acknowledged: still pending")
            XCTAssertEqual(syncA.status.activity, .offline)
            XCTAssertEqual(syncA.status.lastError?.code, .unreachable)
            try await syncA.syncNow()
            XCTAssertEqual(syncA.status.pendingChanges, 0)
            XCTAssertNil(syncA.status.lastError)
            XCTAssertEqual(try cluster.psql("SELECT count(*) FROM strata_sync.changes WHERE zone = '\(zone)'"), "1\n")
            try await syncB.syncNow()
            XCTAssertEqual(try dump(b), ["once||1|-1.0"])
            XCTAssertEqual(syncA.status.serverPosition, 1)
        }

        func testAnUnreachableServerLeavesSavesGoingOn() async throws {
            let url = URL(fileURLWithPath: directory.file("offline.store"))
            let container = track(try ModelContainer(for: Note.self, configurations: ModelConfiguration(url: url)))
            // A port nothing listens on: a cluster's port after it is gone.
            let gone = try PostgresCluster()
            let port = gone.port
            gone.destroy()
            let configuration = try SyncConfiguration(
                server: "postgres://strata@127.0.0.1:\(port)/postgres?sslmode=disable", password: "hunter2-secret",
                zone: "offline")
            let engine = try SyncEngine(container: container, configuration: configuration)
            engines.append(engine)
            let context = ModelContext(container)
            context.insert(Note(title: "offline"))
            try context.save()
            do {
                try await engine.syncNow()
                XCTFail("no server: the round fails")
            } catch {
                XCTAssertEqual(error.code, .unreachable)
                XCTAssertFalse(error.message.contains("hunter2"))
            }
            XCTAssertEqual(engine.status.activity, .offline)
            XCTAssertEqual(engine.status.pendingChanges, 1)
            context.insert(Note(title: "still saving"))
            try context.save()
            XCTAssertEqual(try notes(container).count, 2)
        }

        func testARefusedLoginIsATypedErrorWithoutThePassword() async throws {
            let cluster = try server()
            let url = URL(fileURLWithPath: directory.file("login.store"))
            let container = track(try ModelContainer(for: Note.self, configurations: ModelConfiguration(url: url)))
            let configuration = try SyncConfiguration(server: cluster.url, password: "wrong-secret-123", zone: "login")
            let engine = try SyncEngine(container: container, configuration: configuration)
            engines.append(engine)
            do {
                try await engine.syncNow()
                XCTFail("a wrong password is refused")
            } catch {
                XCTAssertEqual(error.code, .authentication, "\(error)")
                XCTAssertFalse(error.description.contains("wrong-secret-123"))
            }
            // The right password over TCP works.
            let right = try SyncConfiguration(server: cluster.url, password: cluster.password, zone: "login")
            let container2 = track(
                try ModelContainer(
                    for: Note.self,
                    configurations: ModelConfiguration(url: URL(fileURLWithPath: directory.file("login2.store")))))
            let engine2 = try SyncEngine(container: container2, configuration: right)
            engines.append(engine2)
            try await engine2.syncNow()
            XCTAssertNil(engine2.status.lastError)
        }

        /// Each kind of damaged change (a value of the wrong type, bytes
        /// that do not decode, an entity no schema of the zone declares)
        /// changes no model, is set aside with its reason, and sync goes
        /// on past it.
        func testADamagedServerChangeChangesNothingAndIsSetAside() async throws {
            let zone = "zone-\(UUID())"
            let cluster = try server()
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            context.insert(Note(title: "good"))
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            let before = try dump(b)
            // A hostile row: a Note whose `stars` (an Int) holds text.
            var set = SyncChangeSet()
            set.changes.append(
                SyncChangeSet.Change(
                    kind: .insert, entity: "Note", id: SyncID.make(),
                    fields: [
                        SyncChangeSet.Field(name: "title", wire: 2, value: [3] + Array("bad".utf8)),
                        SyncChangeSet.Field(name: "stars", wire: 2, value: [2] + Array("no".utf8)),
                    ]))
            // Garbage bytes, and an entity the schema does not hold.
            var unknown = SyncChangeSet()
            unknown.changes.append(SyncChangeSet.Change(kind: .delete, entity: "Invoice", id: SyncID.make()))
            for (seq, payload) in [set.encode(), [1, 9, 9, 9], unknown.encode()].enumerated() {
                let hex = payload.map { String(format: "%02x", $0) }.joined()
                try cluster.psql(
                    """
                    INSERT INTO strata_sync.changes (zone, seq, device, local_token, schema_hash, payload)
                    VALUES ('\(zone)', \(seq + 2), gen_random_uuid(), 1, 'x', '\\x\(hex)');
                    UPDATE strata_sync.zones SET head = \(seq + 2) WHERE zone = '\(zone)';
                    """)
            }
            try await syncB.syncNow()
            XCTAssertEqual(try dump(b), before)
            XCTAssertEqual(syncB.status.serverPosition, 4)
            XCTAssertEqual(syncB.status.setAside.map(\.serverSequence), [2, 3, 4])
            XCTAssertEqual(Set(syncB.status.setAside.map(\.reason)), [.damaged])
            let messages = syncB.status.setAside.map(\.message)
            XCTAssertTrue(messages[0].contains("wire type"), messages[0])
            XCTAssertTrue(messages[2].contains("Invoice"), messages[2])

            // A's next save goes through after them.
            context.insert(Note(title: "after"))
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            XCTAssertEqual(try dump(b).count, before.count + 1)
            XCTAssertEqual(syncA.status.setAside.map(\.message), messages)
        }

        func testDeletingAllDataJoinsAgainAndTheZoneComesBack() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            context.insert(Note(title: "kept"))
            try context.save()
            try await syncA.syncNow()
            // The store forgets its models and its sync state; a save after
            // it goes to the zone from a new device, and the zone's models
            // come back, as from CloudKit after a store is deleted.
            try a.erase()
            XCTAssertEqual(try dump(a), [])
            let after = ModelContext(a)
            after.insert(Note(title: "after"))
            try after.save()
            try await syncA.syncNow()
            XCTAssertEqual(try dump(a), ["after||0|-1.0", "kept||0|-1.0"])
            try await syncB.syncNow()
            XCTAssertEqual(try dump(b), try dump(a))
            XCTAssertEqual(syncB.status.serverPosition, 2)
        }

        func testANotificationWakesTheOtherDevice() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let arrived = expectation(description: "b applies a's save")
            let observer = NotificationCenter.default.addObserver(
                forName: SyncEngine.didApplyRemoteChanges, object: b, queue: nil
            ) { note in
                let inserted = note.userInfo?[ModelContext.NotificationKey.insertedIdentifiers.rawValue]
                if let inserted = inserted as? [PersistentIdentifier], inserted.count == 1 { arrived.fulfill() }
            }
            defer { NotificationCenter.default.removeObserver(observer) }
            // Polling every minute: only the notification can wake b in time.
            XCTAssertEqual(syncB.status.notifications, .polling)
            syncA.start()
            syncB.start()
            // The status stream tells when b listens.
            try await status(of: syncB) { $0.notifications == .live }
            let context = ModelContext(a)
            context.insert(Note(title: "live"))
            try context.save()
            await fulfillment(of: [arrived], timeout: 10)
            XCTAssertEqual(try dump(b), ["live||0|-1.0"])
            await syncB.stop()
            XCTAssertEqual(syncB.status.notifications, .polling)
            XCTAssertEqual(syncB.status.activity, .stopped)
        }

        /// A server runs the engine in a `ServiceGroup`: it syncs, and the
        /// group's graceful shutdown stops it; the injected logger hears
        /// the rounds, and nothing is printed without one.
        func testTheEngineRunsAsAServiceAndLogsToTheAppsLogger() async throws {
            let zone = "zone-\(UUID())"
            let url = URL(fileURLWithPath: directory.file("service.store"))
            let container = track(try ModelContainer(for: Note.self, configurations: ModelConfiguration(url: url)))
            let heard = HeardLog()
            var logger = Logger(label: "strata.sync.test") { _ in heard }
            logger.logLevel = .debug
            let engine = try SyncEngine(container: container, configuration: try configuration(zone: zone), logger: logger)
            let group = ServiceGroup(services: [engine], logger: Logger(label: "group") { _ in SwiftLogNoOpLogHandler() })
            let context = ModelContext(container)
            context.insert(Note(title: "from a service"))
            try context.save()
            let running = Task { try await group.run() }
            try await status(of: engine) { $0.pendingChanges == 0 && $0.lastSync != nil }
            await group.triggerGracefulShutdown()
            try await running.value
            XCTAssertEqual(engine.status.activity, .stopped)
            XCTAssertEqual(try head(zone), 1)
            XCTAssertTrue(heard.lines.contains { $0.hasPrefix("debug round: at change 1 of 1") }, "\(heard.lines)")
            XCTAssertTrue(heard.lines.allSatisfy { $0.contains("zone=\(zone)") }, "\(heard.lines)")
        }

        /// The status stream starts with the status now and follows a
        /// round through its activities to the end.
        func testTheStatusStreamFollowsARound() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let context = ModelContext(a)
            for title in ["one", "two", "three"] {
                context.insert(Note(title: title))
                try context.save()
            }
            // Local saves count as pending at once, before any round.
            XCTAssertEqual(syncA.status.pendingChanges, 3)
            let updates = syncA.statusUpdates
            let seen = Task {
                var seen: [SyncStatus] = []
                for await status in updates {
                    seen.append(status)
                    if status.lastSync != nil { break }
                }
                return seen
            }
            try await syncA.syncNow()
            let statuses = await seen.value
            XCTAssertEqual(statuses.first?.pendingChanges, 3, "the status at the start")
            XCTAssertTrue(statuses.contains { $0.activity == .pushing }, "\(statuses.map(\.activity))")
            XCTAssertEqual(statuses.last?.pendingChanges, 0)
            XCTAssertEqual(statuses.last?.serverPosition, 3)
        }
    }

    /// A log handler that keeps each line as "level message key=value".
    final class HeardLog: LogHandler, @unchecked Sendable {
        // Guarded by `lock`.
        private var kept: [String] = []
        private let lock = NSLock()
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        var lines: [String] { lock.withLock { kept } }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = (event.metadata ?? [:]).map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
            lock.withLock { kept.append("\(event.level) \(event.message) \(fields)") }
        }
    }

    /// A server that passes every call on to `base`; the tests' faulty
    /// servers override the calls they break.
    class ForwardingServer: ZoneServer, @unchecked Sendable {
        let base: any ZoneServer

        init(_ base: any ZoneServer) { self.base = base }

        func prepare() async throws(SyncError) { try await base.prepare() }
        func push(zone: String, device: [UInt8], token: Int64, expected: Int64, schema: String, payload: [UInt8])
            async throws(SyncError) -> PushOutcome
        {
            try await base.push(zone: zone, device: device, token: token, expected: expected, schema: schema, payload: payload)
        }
        func register(zone: String, hash: String, description: String, accept: @escaping @Sendable ([String]) throws -> Void)
            async throws(SyncError) -> [String]
        {
            try await base.register(zone: zone, hash: hash, description: description, accept: accept)
        }
        func head(zone: String) async throws(SyncError) -> ZoneHead { try await base.head(zone: zone) }
        func snapshotPart(zone: String, through: Int64, part: Int) async throws(SyncError) -> [UInt8]? {
            try await base.snapshotPart(zone: zone, through: through, part: part)
        }
        func trim(zone: String, through: Int64, parts: [[UInt8]]) async throws(SyncError) -> Bool {
            try await base.trim(zone: zone, through: through, parts: parts)
        }
        func pull(zone: String, after: Int64, limit: Int) async throws(SyncError) -> [ServerChange] {
            try await base.pull(zone: zone, after: after, limit: limit)
        }
        func setAside(zone: String, seq: Int64, code: String, reason: String) async throws(SyncError) -> Bool {
            try await base.setAside(zone: zone, seq: seq, code: code, reason: reason)
        }
        func missingParts(zone: String, values: [(digest: [UInt8], parts: Int)]) async throws(SyncError)
            -> [(digest: [UInt8], part: Int)]
        {
            try await base.missingParts(zone: zone, values: values)
        }
        func putParts(zone: String, parts: [(digest: [UInt8], part: Int, bytes: [UInt8])]) async throws(SyncError) {
            try await base.putParts(zone: zone, parts: parts)
        }
        func parts(zone: String, _ wanted: [(digest: [UInt8], part: Int)]) async throws(SyncError)
            -> [(digest: [UInt8], part: Int, bytes: [UInt8])]
        {
            try await base.parts(zone: zone, wanted)
        }
        func listen(zone: String, listening: @escaping @Sendable () -> Void, wake: @escaping @Sendable () -> Void)
            async throws(SyncError)
        {
            try await base.listen(zone: zone, listening: listening, wake: wake)
        }
        func close() async { await base.close() }
    }

    /// A server whose first push reply is lost: the push commits, then the
    /// call fails as a broken connection would.
    final class LosingReplies: ForwardingServer, @unchecked Sendable {
        // Guarded by `lock`.
        private var lost = false
        private let lock = NSLock()

        override func push(
            zone: String, device: [UInt8], token: Int64, expected: Int64, schema: String, payload: [UInt8]
        ) async throws(SyncError) -> PushOutcome {
            let outcome = try await base.push(
                zone: zone, device: device, token: token, expected: expected, schema: schema, payload: payload)
            let lose = lock.withLock {
                defer { lost = true }
                return !lost
            }
            if lose { throw SyncError(.unreachable, "the reply was lost") }
            return outcome
        }
    }
#endif
