#if Sync
    import Foundation
    import Strata
    @testable import StrataSync
    import StrataTesting
    import XCTest

    /// Sync through faults: a device process killed (SIGKILL) in the middle
    /// of a push and of a pull, the server restarted in the middle of a
    /// push, and the connections cut in the middle of a pull. After each,
    /// the devices converge with every save applied once.
    final class SyncFaultTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Note.self] }

        /// Saves of each test: enough that a fault lands in the middle.
        let saves = 1_500

        func titles(_ container: ModelContainer) throws -> [String] {
            try ModelContext(container).fetch(FetchDescriptor<Note>()).map(\.title).sorted()
        }

        var expectedTitles: [String] { (0..<saves).map { "p\($0)" }.sorted() }

        /// Saves authored "sync" in `container`'s history: one per server
        /// change applied.
        func appliedChanges(_ container: ModelContainer) throws -> Int {
            try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).filter {
                $0.author == "sync"
            }.count
        }

        /// Waits (up to 60 s) until `condition` holds, checking every 10 ms.
        func wait(_ what: String, _ condition: () throws -> Bool) throws {
            let deadline = Date().addingTimeInterval(60)
            while try !condition() {
                guard Date() < deadline else { throw PostgresCluster.Failure(description: "timed out waiting: \(what)") }
                usleep(10_000)
            }
        }

        /// Runs the device executable; returns the process, its output file.
        func spawn(_ role: String, store: String, zone: String, output: String) throws -> Process {
            let cluster = try server()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try executableBesideTests("strata-sync-device"))
            process.arguments = [
                role, directory.file(store), zone, cluster.socketDirectory, "\(cluster.port)", cluster.user,
                cluster.database, "\(saves)", directory.file(output),
            ]
            let errors = directory.file(output + ".err")
            _ = FileManager.default.createFile(atPath: errors, contents: nil)
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
            try process.run()
            return process
        }

        func lines(_ output: String) -> [String] {
            ((try? String(contentsOfFile: directory.file(output), encoding: .utf8)) ?? "").split(separator: "\n").map(
                String.init)
        }

        /// Waits (up to 120 s) for `process` to exit, and checks it succeeded.
        func finish(_ process: Process, _ output: String) {
            let deadline = Date().addingTimeInterval(120)
            while process.isRunning && Date() < deadline { usleep(20_000) }
            if process.isRunning {
                XCTFail("\(output): the device did not finish in 120 s: \(lines(output).suffix(3))")
                kill(process.processIdentifier, SIGKILL)
            }
            process.waitUntilExit()
            let errors = (try? String(contentsOfFile: directory.file(output + ".err"), encoding: .utf8)) ?? ""
            XCTAssertEqual(process.terminationStatus, 0, "\(output): \(errors)")
        }

        func kill9(_ process: Process) {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            XCTAssertEqual(process.terminationReason, .uncaughtSignal)
        }

        func testADeviceKilledInTheMiddleOfAPushAndOfAPullRecovers() async throws {
            let zone = "zone-\(UUID())"
            // A joins and saves, then pushes; it is killed mid-push.
            finish(try spawn("fill", store: "a.store", zone: zone, output: "fill.out"), "fill.out")
            let pushing = try spawn("sync", store: "a.store", zone: zone, output: "push1.out")
            try wait("A's first pushes") { try head(zone) >= 100 }
            kill9(pushing)
            let reached = try head(zone)
            XCTAssertLessThan(reached, saves, "the kill came after the push ended: nothing was tested")
            // Started again, it pushes the rest, each save once.
            let again = try spawn("sync", store: "a.store", zone: zone, output: "push2.out")
            finish(again, "push2.out")
            XCTAssertEqual(lines("push2.out").last, "done \(saves)")
            XCTAssertEqual(try head(zone), saves)
            XCTAssertEqual(
                try server().psql("SELECT count(DISTINCT local_token) FROM strata_sync.changes WHERE zone = '\(zone)'"),
                "\(saves)\n")

            // C, a new device, is killed mid-pull, then pulls the rest.
            let pulling = try spawn("sync", store: "c.store", zone: zone, output: "pull1.out")
            var killedAt = 0
            try wait("C's first pulls") {
                guard let last = lines("pull1.out").last, last.hasPrefix("position ") else { return false }
                killedAt = Int(last.split(separator: " ")[1]) ?? 0
                return killedAt >= 100
            }
            kill9(pulling)
            XCTAssertLessThan(killedAt, saves, "the kill came after the pull ended: nothing was tested")
            finish(try spawn("sync", store: "c.store", zone: zone, output: "pull2.out"), "pull2.out")
            XCTAssertEqual(lines("pull2.out").last, "done \(saves)")

            // Every store holds every save once; C applied each change once.
            let (a, syncA) = try device("a", zone: zone)
            let (c, syncC) = try device("c", zone: zone)
            XCTAssertEqual(syncA.status.pendingChanges, 0)
            XCTAssertEqual(syncC.status.serverPosition, Int64(saves))
            XCTAssertEqual(try titles(a), expectedTitles)
            XCTAssertEqual(try titles(c), expectedTitles)
            XCTAssertEqual(try appliedChanges(c), saves, "no change applied twice, none skipped")
            XCTAssertEqual(try a.checkIntegrity(), [])
            XCTAssertEqual(try c.checkIntegrity(), [])
        }

        func testARequestWithNoAnswerTimesOutAndIsAppliedOnce() async throws {
            let zone = "zone-\(UUID())"
            let cluster = try server()
            let url = URL(fileURLWithPath: directory.file("a.store"))
            let a = track(try ModelContainer(for: Note.self, configurations: ModelConfiguration(url: url)))
            var configuration = try configuration(zone: zone)
            configuration.requestTimeout = .seconds(1)
            let syncA = try SyncEngine(container: a, configuration: configuration)
            engines.append(syncA)
            let context = ModelContext(a)
            context.insert(Note(title: "p0"))
            try context.save()
            try await syncA.syncNow()
            context.insert(Note(title: "p1"))
            try context.save()
            // Another session holds the zone's row for 4 s: the push waits
            // for it, past the limit.
            let holder = Thread {
                _ = try? cluster.psql(
                    "BEGIN; SELECT head FROM strata_sync.zones WHERE zone = '\(zone)' FOR UPDATE; SELECT pg_sleep(4); COMMIT;")
            }
            holder.start()
            try wait("the row lock") {
                try cluster.psql(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(4)%' AND pid <> pg_backend_pid()")
                    != "0\n"
            }
            do {
                try await syncA.syncNow()
                XCTFail("the push should time out")
            } catch {
                XCTAssertEqual(error.code, .unreachable)
                XCTAssertTrue(error.message.contains("no answer"), error.message)
            }
            // The push gave up while the row was still locked: it did not
            // wait for the lock (no wall-clock bound, which a loaded
            // machine could break).
            XCTAssertEqual(
                try cluster.psql(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(4)%' AND pid <> pg_backend_pid()"),
                "1\n")
            // Once the lock is gone, the push the server went on with is
            // recognized: the save is in the zone once.
            try wait("the lock's end") { try head(zone) == 2 }
            try await syncA.syncNow()
            XCTAssertEqual(syncA.status.pendingChanges, 0)
            XCTAssertEqual(try head(zone), 2)
        }

        func testIdleDevicesConvergeWithinSecondsOfTheServersReturn() async throws {
            let zone = "zone-\(UUID())"
            let cluster = try server()
            // Polling every minute: only reconnecting can bring them back
            // in time.
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            syncA.start()
            syncB.start()
            try wait("both idle") { syncA.status.activity == .idle && syncB.status.activity == .idle }
            try cluster.stop()
            let context = ModelContext(a)
            context.insert(Note(title: "saved while the server was down"))
            try context.save()
            try wait("A offline") { syncA.status.activity == .offline }
            try await Task.sleep(for: .seconds(2))
            try cluster.start()
            let back = Date()
            try wait("B holds A's save") { try titles(b) == ["saved while the server was down"] }
            XCTAssertLessThan(Date().timeIntervalSince(back), 5, "B converged more than 5 s after the server's return")
            try wait("A pushed") { syncA.status.pendingChanges == 0 }
        }

        /// A change no device can read stops no zone: the first device to
        /// meet it sets it aside in the zone and goes on (pushing its own
        /// saves after it); every other device moves past it unread; the
        /// operator and the apps see it.
        func testAGarbageChangeIsSetAsideAndEveryDeviceGoesOn() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let contextA = ModelContext(a)
            contextA.insert(Note(title: "before"))
            try contextA.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            try pushGarbage(zone)

            let contextB = ModelContext(b)
            contextB.insert(Note(title: "saved on B after the garbage"))
            try contextB.save()
            try await syncB.syncNow()
            XCTAssertEqual(syncB.status.pendingChanges, 0)
            XCTAssertNil(syncB.status.lastError)
            XCTAssertEqual(syncB.status.setAside.map(\.serverSequence), [2])
            XCTAssertEqual(syncB.status.setAside.first?.reason, .damaged)
            XCTAssertEqual(syncB.status.setAside.first?.isOwnSave, false)
            XCTAssertEqual(try head(zone), 3)
            let recorded = try server().psql(
                "SELECT seq, set_aside_code, set_aside_by IS NOT NULL FROM strata_sync.changes "
                    + "WHERE zone = '\(zone)' AND set_aside_code IS NOT NULL")
            XCTAssertEqual(recorded, "2|damaged|t\n")

            try await syncA.syncNow()
            XCTAssertEqual(try titles(a), ["before", "saved on B after the garbage"])
            XCTAssertEqual(syncA.status.setAside.map(\.serverSequence), [2])
            XCTAssertEqual(syncA.status.setAside.first?.message, syncB.status.setAside.first?.message)

            // A new device pulls past it; the operator lists it.
            let (c, syncC) = try device("c", zone: zone)
            try await syncC.syncNow()
            XCTAssertEqual(try titles(c), ["before", "saved on B after the garbage"])
            XCTAssertEqual(syncC.status.setAside.count, 1)
            let listed = try await SyncServer(configuration: try configuration(zone: zone)).setAsideChanges(zone: zone)
            XCTAssertEqual(listed.map(\.serverSequence), [2])
            XCTAssertEqual(listed.first?.code, "damaged")
            XCTAssertFalse(listed.first?.reason.isEmpty ?? true)

            // Kept across launches: a new engine on B's store reports it.
            let again = try SyncEngine(container: b, configuration: try configuration(zone: zone))
            XCTAssertEqual(again.status.setAside.map(\.serverSequence), [2])
        }

        /// The operator empties the zone on the server (one `DELETE`): each
        /// device notices at its next round, says so in its status, and
        /// uploads what it holds again under the same identifiers, so that
        /// a new device pulls everything once, with no copies.
        func testAZoneEmptiedOnTheServerIsNoticedAndFilledAgain() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let contextA = ModelContext(a)
            contextA.insert(Note(title: "one"))
            contextA.insert(Note(title: "two"))
            try contextA.save()
            try await syncA.syncNow()
            let contextB = ModelContext(b)
            contextB.insert(Note(title: "three"))
            try contextB.save()
            try await syncB.syncNow()
            try await syncA.syncNow()
            XCTAssertEqual(try head(zone), 2)
            XCTAssertNil(syncA.status.rejoined)

            try server().psql(
                "DELETE FROM strata_sync.changes WHERE zone = '\(zone)'; "
                    + "UPDATE strata_sync.zones SET head = 0 WHERE zone = '\(zone)'")
            contextA.insert(Note(title: "four, saved while the zone was empty"))
            try contextA.save()
            try await syncA.syncNow()
            XCTAssertNil(syncA.status.lastError)
            let rejoined = try XCTUnwrap(syncA.status.rejoined, "A says the zone lost its changes")
            XCTAssertEqual(rejoined.formerPosition, 2)
            XCTAssertEqual(rejoined.serverHead, 0)
            XCTAssertEqual(syncA.status.pendingChanges, 0)
            // B, at change 2 of a zone whose head is 1 now, notices too.
            try await syncB.syncNow()
            XCTAssertNotNil(syncB.status.rejoined)
            try await syncA.syncNow()
            let all = ["four, saved while the zone was empty", "one", "three", "two"]
            XCTAssertEqual(try titles(a), all)
            XCTAssertEqual(try titles(b), all)
            let (c, syncC) = try device("c", zone: zone)
            try await syncC.syncNow()
            XCTAssertEqual(try titles(c), all, "no copies: both uploads name the models by their identifiers")
            XCTAssertNil(syncC.status.rejoined)
            // Kept across launches.
            XCTAssertNotNil(try SyncEngine(container: a, configuration: try configuration(zone: zone)).status.rejoined)
        }

        /// The server comes back from an older backup, and another device
        /// pushes after it: the zone's head is past this device's position,
        /// but the change there is not the one it applied. It joins again,
        /// and a delete the backup lost goes up again with its models.
        func testAZoneRestoredFromAnOlderBackupIsNoticed() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let contextA = ModelContext(a)
            let doomed = Note(title: "deleted after the backup")
            contextA.insert(doomed)
            contextA.insert(Note(title: "kept"))
            try contextA.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            // Changes 2 and 3, after the backup at change 1.
            contextA.delete(doomed)
            try contextA.save()
            contextA.insert(Note(title: "saved after the backup"))
            try contextA.save()
            try await syncA.syncNow()
            XCTAssertEqual(try head(zone), 3)
            try server().psql(
                "DELETE FROM strata_sync.changes WHERE zone = '\(zone)' AND seq > 1; "
                    + "UPDATE strata_sync.zones SET head = 1 WHERE zone = '\(zone)'")
            // B, at change 1, pushes changes 2, 3 and 4 of the restored zone.
            let contextB = ModelContext(b)
            for title in ["b1", "b2", "b3"] {
                contextB.insert(Note(title: title))
                try contextB.save()
                try await syncB.syncNow()
            }
            XCTAssertNil(syncB.status.rejoined, "B was not ahead of the backup")
            XCTAssertEqual(try head(zone), 4)

            try await syncA.syncNow()
            XCTAssertNil(syncA.status.lastError)
            XCTAssertEqual(syncA.status.rejoined?.formerPosition, 3)
            try await syncB.syncNow()
            let all = ["b1", "b2", "b3", "kept", "saved after the backup"]
            XCTAssertEqual(try titles(a), all)
            XCTAssertEqual(try titles(b), all)
            let (c, syncC) = try device("c", zone: zone)
            try await syncC.syncNow()
            XCTAssertEqual(try titles(c), all)
        }

        /// A store leaves its zone keeping its models and joins another,
        /// uploading them there; another leaves dropping its models, which
        /// the zone keeps.
        func testAStoreLeavesItsZoneAndJoinsAnother() async throws {
            let first = "zone-\(UUID())"
            let second = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: first)
            let (b, syncB) = try device("b", zone: first)
            let contextA = ModelContext(a)
            contextA.insert(Note(title: "one"))
            try contextA.save()
            try await syncA.syncNow()
            try await syncB.syncNow()

            try await syncA.leaveZone(keepingData: true)
            XCTAssertEqual(try titles(a), ["one"])
            XCTAssertEqual(syncA.status.serverPosition, 0)
            do {
                try await syncA.syncNow()
                XCTFail("an engine whose store left its zone does not sync")
            } catch {
                XCTAssertEqual(error.code, .stopped)
            }
            let inSecond = try SyncEngine(container: a, configuration: try configuration(zone: second))
            try await inSecond.syncNow()
            XCTAssertEqual(try head(second), 1, "the models went up as one upload")
            let (c, syncC) = try device("c", zone: second)
            try await syncC.syncNow()
            XCTAssertEqual(try titles(c), ["one"])

            // The first zone goes on without a; b drops its copy.
            let contextB = ModelContext(b)
            contextB.insert(Note(title: "two"))
            try contextB.save()
            try await syncB.syncNow()
            try await inSecond.syncNow()
            XCTAssertEqual(try titles(a), ["one"])
            try await syncB.leaveZone(keepingData: false)
            XCTAssertEqual(try titles(b), [])
            let (d, syncD) = try device("d", zone: first)
            try await syncD.syncNow()
            XCTAssertEqual(try titles(d), ["one", "two"])
        }

        /// `waitUntilSynced()` waits through a server that is down and
        /// returns once the save it followed is on the server.
        func testWaitUntilSyncedWaitsForTheServersReturn() async throws {
            let zone = "zone-\(UUID())"
            let cluster = try server()
            let (a, syncA) = try device("a", zone: zone)
            try await syncA.syncNow()
            try cluster.stop()
            let context = ModelContext(a)
            context.insert(Note(title: "saved while the server was down"))
            try context.save()
            let waiting = Task { try await syncA.waitUntilSynced() }
            try await Task.sleep(for: .seconds(1))
            XCTAssertEqual(syncA.status.activity, .offline)
            try cluster.start()
            try await waiting.value
            XCTAssertEqual(syncA.status.pendingChanges, 0)
            XCTAssertEqual(try head(zone), 1)

            // A refusal is not waited out.
            var wrong = try configuration(zone: zone, user: "nobody_here")
            wrong.requestTimeout = .seconds(5)
            let url = URL(fileURLWithPath: directory.file("b.store"))
            let b = track(try ModelContainer(for: Note.self, configurations: ModelConfiguration(url: url)))
            let refused = try SyncEngine(container: b, configuration: wrong)
            engines.append(refused)
            do {
                try await refused.waitUntilSynced()
                XCTFail("a login the server refuses is not waited out")
            } catch {
                XCTAssertEqual(error.code, .authentication, "\(error)")
                XCTAssertEqual(refused.status.activity, .refused)
            }
        }

        func testBackoffDoublesFromOneSecondUpToItsLimit() {
            var backoff = Backoff(limit: .seconds(30))
            let delays = (0..<7).map { _ in backoff.next() }
            XCTAssertEqual(delays, [1, 2, 4, 8, 16, 30, 30].map { Duration.seconds($0) })
            backoff.reset()
            XCTAssertEqual(backoff.next(), .seconds(1))
            var short = Backoff(limit: .milliseconds(500))
            XCTAssertEqual(short.next(), .milliseconds(500))
        }

        func testAServerRestartAndCutConnectionsInTheMiddleOfSync() async throws {
            let zone = "zone-\(UUID())"
            let cluster = try server()
            let (a, syncA) = try device("a", zone: zone)
            let context = ModelContext(a)
            for index in 0..<saves {
                context.insert(Note(title: "p\(index)", stars: index % 5))
                try context.save()
            }
            // The server stops while A pushes, and starts again.
            let push = Task { try await syncA.syncNow() }
            try wait("A's first pushes") { try head(zone) >= 100 }
            try cluster.stop()
            switch await push.result {
            case .success: XCTFail("the push ended before the server stopped: nothing was tested")
            case .failure(let error): XCTAssertEqual((error as? SyncError)?.code, .unreachable, "\(error)")
            }
            XCTAssertEqual(syncA.status.activity, .offline)
            XCTAssertGreaterThan(syncA.status.pendingChanges, 0)
            try cluster.start()
            try await syncA.syncNow()
            XCTAssertEqual(syncA.status.pendingChanges, 0)
            XCTAssertEqual(try head(zone), saves)

            // B's connections are cut while it pulls (paced: 20 changes a
            // pull, one pull each 20 ms, so that the cut lands mid-pull).
            let url = URL(fileURLWithPath: directory.file("b.store"))
            let b = track(try ModelContainer(for: Note.self, configurations: ModelConfiguration(url: url)))
            let paced = CuttingPulls(
                PostgresZoneServer(configuration: try configuration(zone: zone)), batch: 20, delay: .milliseconds(20))
            let syncB = try SyncEngine(container: b, configuration: try configuration(zone: zone), server: paced)
            engines.append(syncB)
            let pull = Task { try await syncB.syncNow() }
            try wait("B's first pulls") { syncB.status.serverPosition >= 100 }
            let cut = try cluster.psql(
                """
                SELECT count(*) FROM (
                    SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity
                    WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()) AS cut
                WHERE done
                """)
            let cutAt = syncB.status.serverPosition
            XCTAssertNotEqual(cut, "0\n", "no connection was cut")
            XCTAssertLessThan(cutAt, Int64(saves), "the cut came after the pull ended: nothing was tested")
            // A connection cut between two requests is opened again; one cut
            // under a request fails the round, and the next one resumes.
            // A round that starts behind the head pulls the change at its
            // position again, to check that the zone still holds it.
            var checked = 0
            if case .failure(let error) = await pull.result {
                XCTAssertTrue([.unreachable, .server].contains((error as? SyncError)?.code), "\(error)")
                try await syncB.syncNow()
                checked = 1
            }
            XCTAssertEqual(syncB.status.serverPosition, Int64(saves))
            XCTAssertEqual(try titles(b), expectedTitles)
            XCTAssertEqual(try appliedChanges(b), saves, "no change applied twice, none skipped")
            XCTAssertEqual(paced.pulled, saves + checked)
            XCTAssertEqual(try b.checkIntegrity(), [])
        }
    }
#endif
