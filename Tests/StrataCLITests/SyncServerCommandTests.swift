import Foundation
import StrataTesting
import XCTest

/// `strata sync-server` against a throwaway PostgreSQL server, as an
/// operator runs it: the password in `PGPASSWORD`, never on the command line.
final class SyncServerCommandTests: XCTestCase {
    func testInstallGrantAndRevoke() throws {
        let cluster = try PostgresCluster()
        defer { cluster.destroy() }
        try cluster.psql("CREATE ROLE dana LOGIN")
        let tool = URL(fileURLWithPath: try executableBesideTests("strata"))
        func strata(_ arguments: String..., password: String? = nil) throws -> (status: Int32, out: String, err: String) {
            try runProcess(tool, ["sync-server"] + arguments, environment: ["PGPASSWORD": password ?? cluster.password])
        }

        let first = try strata("install", "--url", cluster.url)
        XCTAssertEqual(first.status, 0, first.err)
        XCTAssertTrue(first.out.hasPrefix("strata_sync layout: none -> version 4\n"), first.out)
        XCTAssertTrue(first.out.contains("  table zones\n"), first.out)
        XCTAssertEqual(try cluster.psql("SELECT version FROM strata_sync.layout"), "4\n")
        let second = try strata("install", "--url", cluster.url)
        XCTAssertEqual(second.status, 0, second.err)
        XCTAssertTrue(second.out.hasPrefix("strata_sync layout: version 4, already installed"), second.out)

        let grant = try strata("grant", "--url", cluster.url, "--zone", "team", "--role", "dana", "--read-only")
        XCTAssertEqual(grant.status, 0, grant.err)
        XCTAssertEqual(grant.out, "zone team: shared with dana, read-only\n")
        XCTAssertEqual(try cluster.psql("SELECT zone, role, writable FROM strata_sync.access"), "team|dana|f\n")
        XCTAssertEqual(try cluster.psql("SELECT owner FROM strata_sync.zones WHERE zone = 'team'"), "strata\n")
        let write = try strata("grant", "--url", cluster.url, "--zone", "team", "--role", "dana")
        XCTAssertEqual(write.out, "zone team: shared with dana, read-write\n", write.err)
        XCTAssertEqual(try cluster.psql("SELECT writable FROM strata_sync.access"), "t\n")

        let revoke = try strata("revoke", "--url", cluster.url, "--zone", "team", "--role", "dana")
        XCTAssertEqual(revoke.out, "zone team: no longer shared with dana\n", revoke.err)
        let again = try strata("revoke", "--url", cluster.url, "--zone", "team", "--role", "dana")
        XCTAssertEqual(again.out, "zone team was not shared with dana\n", again.err)

        // The changes devices set aside.
        let none = try strata("set-aside", "--url", cluster.url)
        XCTAssertEqual(none.out, "no change set aside\n", none.err)
        try cluster.psql(
            "INSERT INTO strata_sync.changes (zone, seq, device, local_token, schema_hash, payload, set_aside_code, "
                + "set_aside_reason, set_aside_by, set_aside_at) VALUES ('team', 1, '00000000-0000-0000-0000-00000000000a', 1, "
                + "'h', '\\x00'::bytea, 'damaged', 'it does not decode', 'strata', now())")
        let listed = try strata("set-aside", "--url", cluster.url, "--zone", "team")
        XCTAssertEqual(listed.status, 0, listed.err)
        XCTAssertTrue(
            listed.out.hasPrefix(
                "zone team, change 1 (device 00000000-0000-0000-0000-00000000000a): damaged, it does not decode; "
                    + "set aside by strata at "),
            listed.out)

        // Bad input: a role that does not exist, a wrong password.
        let nobody = try strata("grant", "--url", cluster.url, "--zone", "team", "--role", "no_such_role")
        XCTAssertEqual(nobody.status, 2)
        XCTAssertTrue(nobody.err.contains("role no_such_role does not exist"), nobody.err)
        let refused = try strata("install", "--url", cluster.url, password: "wrong-password-42")
        XCTAssertEqual(refused.status, 2)
        XCTAssertTrue(refused.err.contains("authentication"), refused.err)
        XCTAssertFalse(refused.err.contains("wrong-password-42"), refused.err)
    }
}
