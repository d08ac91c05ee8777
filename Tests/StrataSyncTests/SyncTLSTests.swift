#if Sync
    import Foundation
    import Strata
    @testable import StrataSync
    import StrataTesting
    import XCTest

    /// Sync over TCP to a server that takes logins over TLS only, with
    /// libpq's `sslmode` values.
    final class SyncTLSTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Note.self] }
        override class var tls: Bool { true }

        /// A device at `name` whose engine uses the server URL `query`.
        func tcpDevice(_ name: String, zone: String, host: String, query: String) throws -> (ModelContainer, SyncEngine) {
            let cluster = try server()
            let url = URL(fileURLWithPath: directory.file(name + ".store"))
            let container = track(try ModelContainer(for: Note.self, configurations: ModelConfiguration(url: url)))
            let configuration = try SyncConfiguration(
                server: "postgres://\(cluster.user)@\(host):\(cluster.port)/\(cluster.database)?\(query)",
                password: cluster.password, zone: zone)
            let engine = try SyncEngine(container: container, configuration: configuration)
            engines.append(engine)
            return (container, engine)
        }

        func testTheSSLModes() async throws {
            let zone = "zone-\(UUID())"
            let root = try server().rootCertificate
            // Encryption without checking the certificate, as libpq's
            // `require`: the server takes TCP logins over TLS only.
            let (a, syncA) = try tcpDevice("a", zone: zone, host: "127.0.0.1", query: "sslmode=require")
            let context = ModelContext(a)
            context.insert(Note(title: "over TLS"))
            try context.save()
            try await syncA.syncNow()
            XCTAssertEqual(syncA.status.serverPosition, 1)

            // The certificate checked against the test authority, with the
            // host name.
            let (b, syncB) = try tcpDevice(
                "b", zone: zone, host: "localhost", query: "sslmode=verify-full&sslrootcert=\(root)")
            try await syncB.syncNow()
            XCTAssertEqual(try ModelContext(b).fetch(FetchDescriptor<Note>()).map(\.title), ["over TLS"])

            // Refused: no TLS; a certificate no trusted authority signed.
            for (name, query, code, reason) in [
                ("plain", "sslmode=disable", SyncError.Code.authentication, "no encryption"),
                ("untrusted", "sslmode=verify-full", SyncError.Code.unreachable, "TLS failed"),
                ("untrusted-ca", "sslmode=verify-ca", SyncError.Code.unreachable, "TLS failed"),
            ] {
                let (_, engine) = try tcpDevice(name, zone: zone, host: "localhost", query: query)
                do {
                    try await engine.syncNow()
                    XCTFail("\(name): synced")
                } catch {
                    XCTAssertEqual(error.code, code, "\(name): \(error)")
                    XCTAssertTrue(error.message.contains(reason), "\(name): \(error)")
                    XCTAssertFalse(error.message.contains(try server().password), name)
                }
                XCTAssertEqual(engine.status.serverPosition, 0, name)
            }
            XCTAssertThrowsError(try SyncConfiguration(server: "postgres://u@h/d?sslmode=sometimes", zone: zone))
        }
    }
#endif
