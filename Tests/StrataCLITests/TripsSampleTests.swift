import Foundation
import StrataEngine
import XCTest

/// The Trips sample run twice leaves its store as the first run left it,
/// and `strata check` reports a one-to-one whose sides disagree (issue 23:
/// each run used to add an accommodation pointing at the same trip, and
/// the check found nothing wrong).
extension CLITests {
    /// Runs the `trips` example (built beside `strata`) on `store`.
    func runTrips(_ store: String) throws -> (status: Int32, out: String, err: String) {
        let strata = URL(fileURLWithPath: try tool())
        return try run(executable: strata.deletingLastPathComponent().appendingPathComponent("trips"), [store])
    }

    func testTheTripsSampleRunTwiceLeavesTheStoreAsItWas() throws {
        let path = directory.file("trips.store")
        let first = try runTrips(path)
        XCTAssertEqual(first.status, 0, first.err)
        XCTAssertTrue(first.out.contains("Added 4 trips (0 were stored before, 4 now)"), first.out)
        let statsAfterFirst = try run("stats", path)
        XCTAssertEqual(statsAfterFirst.status, 0, statsAfterFirst.err)
        let counts = statsAfterFirst.out.split(separator: "\n").filter { $0.hasPrefix("entity ") }
        XCTAssertEqual(
            counts, ["entity BucketListItem: 4 rows", "entity LivingAccommodation: 4 rows", "entity Trip: 4 rows"])

        let second = try runTrips(path)
        XCTAssertEqual(second.status, 0, second.err)
        XCTAssertTrue(second.out.contains("Added 0 trips (4 were stored before, 4 now)"), second.out)
        let statsAfterSecond = try run("stats", path)
        XCTAssertEqual(statsAfterSecond.out.split(separator: "\n").filter { $0.hasPrefix("entity ") }, counts)
        let check = try run("check", path)
        XCTAssertEqual(check.status, 0, check.out + check.err)

        // An accommodation moved to another trip in storage alone: the
        // trip it left and the one it joined no longer agree with it.
        let database = try Database.open(path: path)
        try database.write { tx in
            let records = try tx.tree("e.LivingAccommodation")
            let (key, value) = try XCTUnwrap(tx.scan(records).first)
            // Its last field is `trip` (field 2, a varint row id below 128).
            XCTAssertEqual(value[value.count - 2], 2 << 3)
            var moved = value
            moved[moved.count - 1] = value[value.count - 1] == 1 ? 2 : 1
            try tx.put(key, moved, in: records)
        }
        try database.close()
        let damaged = try run("check", path)
        XCTAssertEqual(damaged.status, 1, damaged.out + damaged.err)
        XCTAssertTrue(damaged.out.contains("a one-to-one must be mutual"), damaged.out)
        XCTAssertTrue(damaged.out.contains("e.LivingAccommodation row 1: trip points at Trip row"), damaged.out)
        XCTAssertTrue(damaged.out.contains("e.Trip row"), damaged.out)
    }
}
