#if Sync
    import Foundation
    import Strata
    @testable import StrataSync
    import StrataTesting
    import XCTest

    /// Zones closed by PostgreSQL itself (issue 46): an operator installs
    /// the layout; devices log in as roles with no DDL rights; a role
    /// reaches only the zones it owns or that are shared with it, through
    /// the devices and through a `psql` session alike.
    final class SyncAccessTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Note.self] }

        /// Three people, each a login role with no right of its own.
        static let people = ["alice", "bob", "carol"]

        override func setUp() async throws {
            try await super.setUp()
            let cluster = try server()
            for role in Self.people {
                try cluster.psql(
                    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '\(role)') THEN "
                        + "CREATE ROLE \(role) LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE; END IF; END $$")
            }
        }

        /// Alice's phone on `zone`, which it creates with a note titled
        /// `title`, pushed; and the phone's context.
        func alicesPhone(zone: String, with title: String) async throws -> (ModelContainer, SyncEngine, ModelContext) {
            let (phone, sync) = try device("alice-phone", zone: zone, user: "alice")
            let context = ModelContext(phone)
            context.insert(Note(title: title))
            try context.save()
            try await sync.syncNow()
            return (phone, sync, context)
        }

        func titles(_ container: ModelContainer) throws -> [String] {
            try ModelContext(container).fetch(FetchDescriptor<Note>()).map(\.title).sorted()
        }

        /// The operator's calls, as `role` over the socket.
        func operatorServer(as role: String? = nil) throws -> SyncServer {
            SyncServer(configuration: try configuration(zone: "unused", user: role))
        }

        /// Runs `body`, which must throw a ``SyncError`` of `code`; returns it.
        func expectSyncError(
            _ code: SyncError.Code, _ body: () async throws -> Void, file: StaticString = #filePath, line: UInt = #line
        ) async -> SyncError? {
            do {
                try await body()
                XCTFail("no error; expected \(code)", file: file, line: line)
            } catch let error as SyncError {
                XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
                return error
            } catch {
                XCTFail("\(error); expected a SyncError \(code)", file: file, line: line)
            }
            return nil
        }

        /// `sql` run by `role` in a `psql` session fails with a refusal.
        func expectRefused(_ sql: String, as role: String, file: StaticString = #filePath, line: UInt = #line) {
            do {
                let printed = try server().psql(sql, as: role)
                XCTFail("\(role) ran `\(sql)`: \(printed)", file: file, line: line)
            } catch {
                let text = "\(error)"
                XCTAssertTrue(
                    text.contains("permission denied") || text.contains("may not") || text.contains("must be owner"),
                    "\(role), `\(sql)`: \(text)",
                    file: file, line: line)
            }
        }

        func testDevicesOfOneRoleShareItsZoneWithNoDDLRights() async throws {
            let cluster = try server()
            XCTAssertEqual(try cluster.psql("SELECT has_database_privilege('alice', 'postgres', 'CREATE')"), "f\n")
            XCTAssertEqual(try cluster.psql("SELECT has_schema_privilege('alice', 'strata_sync', 'CREATE')"), "f\n")
            let (phone, phoneSync) = try device("alice-phone", zone: "alice-notes", user: "alice")
            let (laptop, laptopSync) = try device("alice-laptop", zone: "alice-notes", user: "alice")
            let context = ModelContext(phone)
            context.insert(Note(title: "groceries"))
            try context.save()
            try await phoneSync.syncNow()
            try await laptopSync.syncNow()
            XCTAssertEqual(try titles(laptop), ["groceries"])
            XCTAssertEqual(try cluster.psql("SELECT owner FROM strata_sync.zones WHERE zone = 'alice-notes'"), "alice\n")
        }

        func testAnotherRolesDeviceIsRefusedKeepsItsSavesAndChangesNothing() async throws {
            let (phone, phoneSync, _) = try await alicesPhone(zone: "alice-private", with: "diary")
            let headBefore = try head("alice-private")

            // Bob configures Alice's zone on his device, with a save of his own.
            let (bobs, bobSync) = try device("bob-phone", zone: "alice-private", user: "bob")
            let bobContext = ModelContext(bobs)
            bobContext.insert(Note(title: "bob's note"))
            try bobContext.save()
            let error = await expectSyncError(.forbidden) { try await bobSync.syncNow() }
            XCTAssertTrue(error?.message.contains("alice-private") ?? false, "\(String(describing: error))")
            XCTAssertEqual(bobSync.status.lastError?.code, .forbidden)
            // Nothing of Alice's reached him, nothing of his reached her
            // zone, and his own save is still there, still pending.
            XCTAssertEqual(try titles(bobs), ["bob's note"])
            XCTAssertEqual(try head("alice-private"), headBefore)
            XCTAssertEqual(bobSync.status.pendingChanges, 1)
            try await phoneSync.syncNow()
            XCTAssertEqual(try titles(phone), ["diary"])
        }

        func testADirectSessionOfARoleWithoutAccessGetsNothingAndChangesNothing() async throws {
            let cluster = try server()
            _ = try await alicesPhone(zone: "alice-sql", with: "secret")
            let counts =
                "SELECT (SELECT count(*) FROM strata_sync.changes), (SELECT count(*) FROM strata_sync.zones), "
                + "(SELECT string_agg(zone || ':' || head, ',' ORDER BY zone) FROM strata_sync.zones), "
                + "(SELECT count(*) FROM strata_sync.parts)"
            let before = try cluster.psql(counts)

            // List, read, pull, push, trim, delete, share, learn the channel.
            expectRefused("SELECT zone FROM strata_sync.zones", as: "bob")
            expectRefused("SELECT payload FROM strata_sync.changes", as: "bob")
            expectRefused("SELECT * FROM strata_sync.pull('alice-sql', 0, 100)", as: "bob")
            expectRefused("SELECT * FROM strata_sync.head('alice-sql')", as: "bob")
            expectRefused("SELECT strata_sync.snapshot_part('alice-sql', 1, 0)", as: "bob")
            expectRefused(
                "SELECT * FROM strata_sync.push('alice-sql', gen_random_uuid(), 1, 1, 'x', '\\x00'::bytea)", as: "bob")
            expectRefused("SELECT strata_sync.trim('alice-sql', 1, ARRAY[]::bytea[])", as: "bob")
            // External values: read, ask after, upload.
            expectRefused("SELECT payload FROM strata_sync.parts", as: "bob")
            expectRefused("SELECT * FROM strata_sync.parts('alice-sql', ARRAY['\\x00'::bytea], ARRAY[0])", as: "bob")
            expectRefused("SELECT * FROM strata_sync.missing_parts('alice-sql', ARRAY['\\x00'::bytea], ARRAY[1])", as: "bob")
            expectRefused(
                "SELECT strata_sync.put_parts('alice-sql', ARRAY['\\x00'::bytea], ARRAY[0], ARRAY['\\x01'::bytea])",
                as: "bob")
            expectRefused("DELETE FROM strata_sync.changes", as: "bob")
            expectRefused("UPDATE strata_sync.zones SET head = 0", as: "bob")
            expectRefused("SELECT strata_sync.channel('alice-sql')", as: "bob")
            expectRefused("SELECT strata_sync.grant_access('alice-sql', 'bob', true)", as: "bob")
            expectRefused("SELECT strata_sync.access_level('alice-sql')", as: "bob")
            expectRefused("DROP TABLE strata_sync.changes", as: "bob")
            expectRefused("CREATE TABLE strata_sync.mine (x int)", as: "bob")
            XCTAssertEqual(try cluster.psql(counts), before)
            // SET ROLE cannot borrow Alice's rights: Bob is not her member.
            expectRefused("SET ROLE alice", as: "bob")
        }

        func testNotificationsReachOnlyRolesThatMayReadTheZone() async throws {
            let cluster = try server()
            let (_, phoneSync, context) = try await alicesPhone(zone: "alice-live", with: "first")
            let channel = try cluster.psql("SELECT strata_sync.channel('alice-live')", as: "alice")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            XCTAssertTrue(channel.hasPrefix("strata_sync_") && channel.count > 40, channel)
            XCTAssertFalse(channel.contains("alice"), channel)

            // Alice's session on her channel and Bob's on version 1's
            // channel listen while her phone pushes.
            let heard = Heard()
            for (role, name) in [("alice", channel), ("bob", "strata_sync")] {
                Thread.detachNewThread {
                    let printed = try? cluster.psql("LISTEN \"\(name)\"", as: role, then: ["SELECT pg_sleep(3)", "SELECT 1"])
                    heard.set(role, printed ?? "psql failed")
                }
            }
            try await Task.sleep(for: .seconds(1))
            context.insert(Note(title: "second"))
            try context.save()
            try await phoneSync.syncNow()
            let deadline = Date().addingTimeInterval(30)
            while heard.count < 2 && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
            XCTAssertEqual(heard.count, 2, "both listening sessions end")
            XCTAssertTrue(heard["alice"].contains("Asynchronous notification"), heard["alice"])
            XCTAssertFalse(heard["alice"].contains("alice-live"), heard["alice"])
            XCTAssertFalse(heard["bob"].contains("Asynchronous notification"), heard["bob"])
        }

        func testReadOnlySharePullsButCannotPush() async throws {
            _ = try await alicesPhone(zone: "alice-shared-ro", with: "recipe")
            try await operatorServer(as: "alice").grant(zone: "alice-shared-ro", to: "bob", readOnly: true)

            let (bobs, bobSync) = try device("bob-phone", zone: "alice-shared-ro", user: "bob")
            try await bobSync.syncNow()
            XCTAssertEqual(try titles(bobs), ["recipe"])
            let headBefore = try head("alice-shared-ro")
            let bobContext = ModelContext(bobs)
            bobContext.insert(Note(title: "bob's edit"))
            try bobContext.save()
            let error = await expectSyncError(.forbidden) { try await bobSync.syncNow() }
            XCTAssertTrue(error?.message.contains("may not write zone alice-shared-ro") ?? false, "\(String(describing: error))")
            XCTAssertEqual(try head("alice-shared-ro"), headBefore)
            XCTAssertEqual(try titles(bobs), ["bob's edit", "recipe"])
            // Nor may it put external values there.
            expectRefused(
                "SELECT strata_sync.put_parts('alice-shared-ro', ARRAY['\\x00'::bytea], ARRAY[0], ARRAY['\\x01'::bytea])",
                as: "bob")
            XCTAssertEqual(try server().psql("SELECT count(*) FROM strata_sync.parts WHERE zone = 'alice-shared-ro'"), "0\n")
            // Carol, not shared with, is refused the share; Bob may not
            // share a zone he does not own.
            _ = await expectSyncError(.forbidden) {
                try await self.operatorServer(as: "bob").grant(zone: "alice-shared-ro", to: "carol")
            }
        }

        /// A role that may only read a zone cannot set a change aside
        /// there (it could hide other roles' changes from everyone): its
        /// device moves past an unreadable change alone, and the owner's
        /// device sets it aside in the zone.
        func testAReadOnlyDeviceMovesPastAnUnreadableChangeAlone() async throws {
            let (phone, phoneSync, context) = try await alicesPhone(zone: "alice-garbage", with: "first")
            try await operatorServer(as: "alice").grant(zone: "alice-garbage", to: "bob", readOnly: true)
            try pushGarbage("alice-garbage")
            let (bobs, bobSync) = try device("bob-phone", zone: "alice-garbage", user: "bob")
            try await bobSync.syncNow()
            XCTAssertEqual(bobSync.status.setAside.map(\.serverSequence), [2])
            XCTAssertEqual(
                try server().psql("SELECT count(*) FROM strata_sync.changes WHERE set_aside_code IS NOT NULL"), "0\n")
            expectRefused("SELECT strata_sync.set_aside('alice-garbage', 1, 'damaged', 'hidden')", as: "bob")

            context.insert(Note(title: "second"))
            try context.save()
            try await phoneSync.syncNow()
            XCTAssertEqual(phoneSync.status.setAside.map(\.serverSequence), [2])
            XCTAssertEqual(
                try server().psql("SELECT seq, set_aside_by FROM strata_sync.changes WHERE set_aside_code IS NOT NULL"),
                "2|alice\n")
            try await bobSync.syncNow()
            XCTAssertEqual(try titles(bobs), ["first", "second"])
            XCTAssertEqual(try titles(phone), ["first", "second"])
            // Bob lists the set-aside changes of zones he may read; Carol
            // sees none of them.
            let bobSees = try await operatorServer(as: "bob").setAsideChanges()
            XCTAssertEqual(bobSees.map(\.zone), ["alice-garbage"])
            let carolSees = try await operatorServer(as: "carol").setAsideChanges()
            XCTAssertEqual(carolSees, [])
            _ = await expectSyncError(.forbidden) {
                _ = try await self.operatorServer(as: "carol").setAsideChanges(zone: "alice-garbage")
            }
        }

        func testRevokingStopsTheNextRoundAndAGrantResumesWithNothingLost() async throws {
            let (phone, phoneSync, context) = try await alicesPhone(zone: "alice-family", with: "a1")
            let alice = try operatorServer(as: "alice")
            try await alice.grant(zone: "alice-family", to: "bob")

            let (bobs, bobSync) = try device("bob-phone", zone: "alice-family", user: "bob")
            let bobContext = ModelContext(bobs)
            bobContext.insert(Note(title: "b1"))
            try bobContext.save()
            try await bobSync.syncNow()
            try await phoneSync.syncNow()
            XCTAssertEqual(try titles(phone), ["a1", "b1"])

            let removed = try await alice.revoke(zone: "alice-family", from: "bob")
            XCTAssertTrue(removed)
            let again = try await alice.revoke(zone: "alice-family", from: "bob")
            XCTAssertFalse(again)
            context.insert(Note(title: "a2"))
            try context.save()
            try await phoneSync.syncNow()
            bobContext.insert(Note(title: "b2 while revoked"))
            try bobContext.save()
            _ = await expectSyncError(.forbidden) { try await bobSync.syncNow() }
            XCTAssertEqual(bobSync.status.activity, .refused)
            XCTAssertEqual(bobSync.status.pendingChanges, 1)
            XCTAssertEqual(try titles(bobs), ["a1", "b1", "b2 while revoked"])

            try await alice.grant(zone: "alice-family", to: "bob")
            try await bobSync.syncNow()
            try await phoneSync.syncNow()
            XCTAssertEqual(try titles(bobs), ["a1", "a2", "b1", "b2 while revoked"])
            XCTAssertEqual(try titles(phone), ["a1", "a2", "b1", "b2 while revoked"])
            XCTAssertNil(bobSync.status.lastError)
            XCTAssertEqual(bobSync.status.activity, .stopped)
        }

        func testAPushInAnotherRolesDeviceNameIsRefused() async throws {
            let cluster = try server()
            _ = try await alicesPhone(zone: "alice-devices", with: "mine")
            try await operatorServer(as: "alice").grant(zone: "alice-devices", to: "bob")
            let device = try cluster.psql("SELECT device FROM strata_sync.changes WHERE zone = 'alice-devices' LIMIT 1")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let before = try head("alice-devices")
            // Bob may write the zone, but not as Alice's phone: a push of a
            // token her phone has not used yet would make her next save a
            // "duplicate" the server drops.
            expectRefused(
                "SELECT * FROM strata_sync.push('alice-devices', '\(device)', 999, \(before), 'x', '\\x00'::bytea)",
                as: "bob")
            XCTAssertEqual(try head("alice-devices"), before)
        }

        /// A device's saves of one zone cannot be replayed into another,
        /// even by its own role: a device pushes to one zone.
        func testAPushReplayedIntoAnotherZoneIsRefused() async throws {
            let cluster = try server()
            _ = try await alicesPhone(zone: "alice-replayed", with: "mine")
            let row = try cluster.psql(
                "SELECT device, local_token, encode(payload, 'hex') FROM strata_sync.changes WHERE zone = 'alice-replayed' LIMIT 1"
            ).trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|").map(String.init)
            XCTAssertEqual(row.count, 3)
            let (_, other) = try device("alice-tablet", zone: "alice-other", user: "alice")
            try await other.syncNow()  // the zone exists, and Alice owns it
            let before = try head("alice-other")
            do {
                let printed = try cluster.psql(
                    "SELECT * FROM strata_sync.push('alice-other', '\(row[0])', \(row[1]), \(before), 'x', "
                        + "decode('\(row[2])', 'hex'))", as: "alice")
                XCTFail("replayed: \(printed)")
            } catch {
                XCTAssertTrue("\(error)".contains("may not push to zone alice-other"), "\(error)")
            }
            XCTAssertEqual(try head("alice-other"), before)
        }

        func testInstallIsIdempotentAndNeverDowngrades() async throws {
            let cluster = try server()
            let again = try await operatorServer().install()
            XCTAssertEqual(again.previousVersion, ServerLayout.version)
            XCTAssertEqual(again.version, ServerLayout.version)
            // A device role may not install.
            _ = await expectSyncError(.forbidden) { _ = try await self.operatorServer(as: "carol").install() }

            try cluster.psql("UPDATE strata_sync.layout SET version = \(ServerLayout.version + 1)")
            do {
                let error = await expectSyncError(.serverLayout) { _ = try await self.operatorServer().install() }
                XCTAssertTrue(error?.message.contains("not downgraded") ?? false, "\(String(describing: error))")
                let (_, sync) = try device("newer", zone: "alice-newer", user: "alice")
                let refused = await expectSyncError(.serverLayout) { try await sync.syncNow() }
                XCTAssertTrue(refused?.message.contains("update the app") ?? false, "\(String(describing: refused))")
            }
            try cluster.psql("UPDATE strata_sync.layout SET version = \(ServerLayout.version)")
        }

        func testADeviceMeetingAnUninstalledServerIsToldTheCommand() async throws {
            let cluster = try server()
            try cluster.psql("DROP DATABASE IF EXISTS bare")
            try cluster.psql("CREATE DATABASE bare")
            var configuration = try configuration(zone: "nothing-here", user: "alice")
            configuration.database = "bare"
            let url = URL(fileURLWithPath: directory.file("bare.store"))
            let container = try ModelContainer(for: Note.self, configurations: ModelConfiguration(url: url))
            let sync = try SyncEngine(container: container, configuration: configuration)
            engines.append(sync)
            track(container)
            let error = await expectSyncError(.serverLayout) { try await sync.syncNow() }
            XCTAssertTrue(error?.message.contains("strata sync-server install") ?? false, "\(String(describing: error))")
            // Nothing was created by the device.
            XCTAssertEqual(try cluster.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'strata_sync'", in: "bare"), "0\n")
        }

        func testAnInstallUpgradesTheLayoutDevicesCreated() async throws {
            let cluster = try server()
            try cluster.psql("DROP DATABASE IF EXISTS legacy")
            try cluster.psql("CREATE DATABASE legacy")
            try cluster.psql("GRANT CREATE ON DATABASE legacy TO carol")
            // Version 1: tables and schema created by a device's role.
            for statement in Self.versionOne {
                try cluster.psql(statement, as: "carol", in: "legacy")
            }
            var configuration = try configuration(zone: "unused")
            configuration.database = "legacy"
            let installed = try await SyncServer(configuration: configuration).install()
            XCTAssertEqual(installed.previousVersion, 1)
            XCTAssertEqual(installed.version, ServerLayout.version)
            XCTAssertEqual(try cluster.psql("SELECT owner FROM strata_sync.zones WHERE zone = 'old'", in: "legacy"), "carol\n")
            // Carol no longer owns the tables, but owns her zone.
            XCTAssertThrowsError(try cluster.psql("DELETE FROM strata_sync.changes", as: "carol", in: "legacy"))
            XCTAssertEqual(
                try cluster.psql("SELECT r_seq FROM strata_sync.pull('old', 0, 10)", as: "carol", in: "legacy"), "1\n")
            XCTAssertThrowsError(
                try cluster.psql("SELECT r_seq FROM strata_sync.pull('old', 0, 10)", as: "bob", in: "legacy"))
        }

        /// A device of today meeting the layout version 1 devices created
        /// (before an operator upgrades it) is told to run the install,
        /// and changes nothing there.
        func testADeviceMeetingTheOldLayoutIsToldTheCommand() async throws {
            let cluster = try server()
            try cluster.psql("DROP DATABASE IF EXISTS oldlayout")
            try cluster.psql("CREATE DATABASE oldlayout")
            for statement in Self.versionOne { try cluster.psql(statement, in: "oldlayout") }
            var configuration = try configuration(zone: "old")
            configuration.database = "oldlayout"
            let url = URL(fileURLWithPath: directory.file("old.store"))
            let container = try ModelContainer(for: Note.self, configurations: ModelConfiguration(url: url))
            let sync = try SyncEngine(container: container, configuration: configuration)
            engines.append(sync)
            track(container)
            let context = ModelContext(container)
            context.insert(Note(title: "kept"))
            try context.save()
            let error = await expectSyncError(.serverLayout) { try await sync.syncNow() }
            XCTAssertTrue(error?.message.contains("strata sync-server install") ?? false, "\(String(describing: error))")
            XCTAssertEqual(try cluster.psql("SELECT count(*) FROM strata_sync.changes", in: "oldlayout"), "1\n")
            XCTAssertEqual(try titles(container), ["kept"])
        }

        /// Two requests at once on a new server connection both get their
        /// answer: the second connection opened must not close the first
        /// one's under it (which left the first request waiting out its
        /// time limit).
        func testConcurrentFirstRequestsShareOneConnection() async throws {
            _ = try await alicesPhone(zone: "alice-race", with: "one")
            for _ in 0..<5 {
                var configuration = try configuration(zone: "alice-race", user: "alice")
                configuration.requestTimeout = .seconds(5)
                let server = PostgresZoneServer(configuration: configuration)
                async let first = server.head(zone: "alice-race")
                async let second = server.head(zone: "alice-race")
                async let third = server.pull(zone: "alice-race", after: 0, limit: 10)
                let heads = try await [first, second]
                XCTAssertEqual(heads.map(\.head), [1, 1])
                let pulled = try await third
                XCTAssertEqual(pulled.count, 1)
                await server.close()
            }
        }

        /// Version 1's layout, as devices created it, with one change.
        static let versionOne = [
            "CREATE SCHEMA strata_sync",
            "CREATE TABLE strata_sync.zones (zone text PRIMARY KEY, head bigint NOT NULL DEFAULT 0, "
                + "created_at timestamptz NOT NULL DEFAULT now(), trimmed bigint NOT NULL DEFAULT 0)",
            "CREATE TABLE strata_sync.changes (zone text NOT NULL REFERENCES strata_sync.zones (zone), seq bigint NOT NULL, "
                + "device uuid NOT NULL, local_token bigint NOT NULL, schema_hash text NOT NULL, payload bytea NOT NULL, "
                + "pushed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (zone, seq), UNIQUE (zone, device, local_token))",
            "CREATE TABLE strata_sync.snapshots (zone text NOT NULL REFERENCES strata_sync.zones (zone), "
                + "through bigint NOT NULL, part integer NOT NULL, payload bytea NOT NULL, PRIMARY KEY (zone, through, part))",
            "CREATE TABLE strata_sync.schemas (zone text NOT NULL REFERENCES strata_sync.zones (zone), hash text NOT NULL, "
                + "description text NOT NULL, registered_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (zone, hash))",
            "CREATE FUNCTION strata_sync.push(p_zone text, p_device uuid, p_token bigint, p_expected bigint, "
                + "p_schema text, p_payload bytea, OUT r_outcome text, OUT r_seq bigint) LANGUAGE sql "
                + "AS $$ SELECT 'appended'::text, 0::bigint $$",
            "INSERT INTO strata_sync.zones (zone, head) VALUES ('old', 1)",
            "INSERT INTO strata_sync.changes (zone, seq, device, local_token, schema_hash, payload) "
                + "VALUES ('old', 1, gen_random_uuid(), 1, 'h', '\\x00'::bytea)",
        ]

        /// What each listening session printed, by role.
        final class Heard: @unchecked Sendable {
            // Guarded by `lock`.
            private var printed: [String: String] = [:]
            private let lock = NSLock()
            func set(_ role: String, _ text: String) { lock.withLock { printed[role] = text } }
            subscript(role: String) -> String { lock.withLock { printed[role] ?? "" } }
            var count: Int { lock.withLock { printed.count } }
        }
    }

#endif
