import Foundation
import Strata
import StrataEngine
import StrataSync
import StrataTesting
import XCTest

@Model final class Ticket {
    @Attribute(.unique) var code: String
    var seats: Int
    var holder: Holder?
    var issued: Date
    var note: String?
    var ref: UUID

    init(code: String, seats: Int) {
        self.code = code
        self.seats = seats
        self.issued = Date(timeIntervalSinceReferenceDate: Double(seats) * 86_400)
        self.ref = UUID(uuidString: "00000000-0000-0000-0000-00000000000\(seats)")!
    }
}

@Model final class Holder {
    var name: String
    @Relationship(inverse: \Ticket.holder) var tickets: [Ticket] = []

    init(name: String) { self.name = name }
}

/// The `strata` tool run as a user runs it: a subprocess on real store
/// files, healthy and damaged.
final class CLITests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = TemporaryDirectory(prefix: "strata-cli")
    }

    /// Store files of the test's directory left out of the tear-down
    /// check, with the reason (a store damaged on purpose).
    var unchecked: [String: String] = [:]

    override func tearDown() {
        checkStores()
        unchecked = [:]
        directory.remove()
        super.tearDown()
    }

    /// The tear-down check of every store file the test left (the tool's
    /// copies, backups and compactions included), but those in
    /// ``unchecked``: the engine's check (pages, trees, counts), then, for
    /// a store of tickets, the object layer's `checkIntegrity()`. A problem
    /// fails the test.
    func checkStores() {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for file in files.sorted() where file.hasSuffix(".store") && unchecked[file] == nil {
            let path = directory.file(file)
            do {
                let database = try Database.open(path: path, options: DatabaseOptions(readOnly: true))
                let report = try database.check()
                let holdsTickets = try database.read { tx in try tx.treeIfPresent("e.Ticket") != nil }
                try database.close()
                if !report.isHealthy { XCTFail("tear-down: the engine check of \(file) found:\n\(report)") }
                // The trips sample's store has a schema of its own.
                guard holdsTickets else { continue }
                let container = try ModelContainer(
                    for: Schema([Ticket.self, Holder.self]),
                    configurations: [ModelConfiguration(url: URL(fileURLWithPath: path), allowsSave: false)])
                let problems = try container.checkIntegrity()
                if !problems.isEmpty { XCTFail("tear-down: checkIntegrity() of \(file) found \(problems)") }
            } catch {
                XCTFail("tear-down: the check of \(file) threw \(error)")
            }
        }
    }

    func tool() throws -> String { try executableBesideTests("strata") }

    /// Runs `strata arguments…`; returns its exit status, stdout and stderr.
    func run(_ arguments: String...) throws -> (status: Int32, out: String, err: String) {
        try run(executable: URL(fileURLWithPath: try tool()), arguments)
    }

    /// Runs `executable` with `arguments`; returns its exit status, stdout
    /// and stderr.
    func run(executable: URL, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        try runProcess(executable, arguments)
    }

    /// A store of 500 tickets and 10 holders, with three saves of history.
    func makeStore(_ name: String = "tickets.store") throws -> String {
        let path = directory.file(name)
        let container = try ModelContainer(
            for: Schema([Ticket.self, Holder.self]), configurations: [ModelConfiguration(url: URL(fileURLWithPath: path))])
        let context = ModelContext(container)
        context.author = "loader"
        let holders = (0..<10).map { Holder(name: "h\($0)") }
        for holder in holders { context.insert(holder) }
        var tickets: [Ticket] = []
        for i in 0..<500 {
            let ticket = Ticket(code: "T\(i)", seats: i % 4 + 1)
            context.insert(ticket)
            ticket.holder = holders[i % 10]
            tickets.append(ticket)
        }
        try context.save()
        tickets[3].seats = 9
        try context.save()
        context.delete(tickets[4])
        try context.save()
        return path
    }

    func testHealthyStore() throws {
        let path = try makeStore()
        let check = try run("check", path)
        XCTAssertEqual(check.status, 0, check.out + check.err)
        XCTAssertTrue(check.out.hasPrefix("ok"), check.out)

        let stats = try run("stats", path)
        XCTAssertEqual(stats.status, 0, stats.err)
        XCTAssertTrue(stats.out.contains("entity Ticket: 499 rows"), stats.out)
        XCTAssertTrue(stats.out.contains("entity Holder: 10 rows"), stats.out)
        XCTAssertTrue(stats.out.contains("page size: 4096 bytes"), stats.out)
        XCTAssertTrue(stats.out.contains("tree u.Ticket.code: 499 entries"), stats.out)

        let schema = try run("schema", path)
        XCTAssertEqual(schema.status, 0, schema.err)
        XCTAssertTrue(schema.out.contains("entity Ticket"), schema.out)
        XCTAssertTrue(schema.out.contains("code: String (attribute, id 1) [unique]"), schema.out)
        XCTAssertTrue(schema.out.contains("unique code"), schema.out)

        let history = try run("history", path)
        XCTAssertEqual(history.status, 0, history.err)
        XCTAssertTrue(history.out.contains("token 1  author loader"), history.out)
        XCTAssertTrue(history.out.contains("update Ticket row 4: seats"), history.out)
        XCTAssertTrue(history.out.contains("delete Ticket row 5"), history.out)
    }

    func testSyncStatusNamesTheZoneAndCountsUnpushedSaves() throws {
        let path = try makeStore()
        let plain = try run("sync-status", path)
        XCTAssertEqual(plain.status, 0, plain.err)
        XCTAssertEqual(plain.out, "not synced (the store never joined a zone)\n")

        let container = try ModelContainer(
            for: Schema([Ticket.self, Holder.self]), configurations: [ModelConfiguration(url: URL(fileURLWithPath: path))])
        let replica = try SyncReplica(container: container)
        _ = try replica.join(zone: "box-office")
        let context = ModelContext(container)
        try context.fetch(FetchDescriptor<Ticket>(predicate: #Predicate { $0.code == "T1" }))[0].seats = 7
        try context.save()
        context.insert(Ticket(code: "T900", seats: 1))
        try context.save()
        let synced = try run("sync-status", path)
        XCTAssertEqual(synced.status, 0, synced.err)
        XCTAssertTrue(synced.out.contains("zone: box-office\n"), synced.out)
        XCTAssertTrue(synced.out.contains("server position: 0\n"), synced.out)
        // The models the store held when it joined are one upload (not its
        // saves before), then the two saves after.
        XCTAssertTrue(synced.out.contains("pending local saves: 3\n"), synced.out)
        XCTAssertFalse(synced.out.contains("joined again"), synced.out)

        // A zone found behind the store: said, with the positions.
        try replica.rejoin(head: 0)
        let rejoined = try run("sync-status", path)
        XCTAssertTrue(
            rejoined.out.contains("joined again: the zone lost changes this store had applied (it was at change 0, "),
            rejoined.out)
        XCTAssertTrue(rejoined.out.contains("pending local saves: 1\n"), rejoined.out)
    }

    /// Damaged sync bookkeeping: `sync-status` says what is damaged and
    /// exits 2, as for any error; it does not trap.
    func testSyncStatusOfDamagedSyncMetadataIsAnError() throws {
        let path = try makeStore()
        let db = try Database.open(path: path)
        try db.write { tx in
            let meta = try tx.createTree("sync.meta")
            try tx.put(Array("zone".utf8), Array("box-office".utf8), in: meta)
            try tx.put(Array("device".utf8), [1, 2, 3, 4, 5, 6, 7, 8], in: meta)
        }
        try db.close()
        let status = try run("sync-status", path)
        XCTAssertEqual(status.status, 2, status.out + status.err)
        XCTAssertTrue(status.err.contains("sync.meta: a device of 8 bytes"), status.err)
    }

    func testDumpDecodesRecordsWithTheStoredSchema() throws {
        let path = try makeStore()
        let dump = try run("dump", path, "--entity", "Ticket", "--json")
        XCTAssertEqual(dump.status, 0, dump.err)
        let lines = dump.out.split(separator: "\n")
        XCTAssertEqual(lines.count, 499)
        let objects = try lines.map { line in
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], String(line))
        }
        let t3 = try XCTUnwrap(objects.first { $0["code"] as? String == "T3" })
        XCTAssertEqual(t3["entity"] as? String, "Ticket")
        XCTAssertEqual(t3["seats"] as? Int, 9)
        XCTAssertEqual(t3["holder"] as? Int, 4, "the holder's row id")
        XCTAssertEqual(t3["issued"] as? String, "2001-01-05T00:00:00Z")
        XCTAssertTrue(t3["note"] is NSNull)
        XCTAssertEqual(t3["ref"] as? String, "00000000-0000-0000-0000-000000000004")

        let plain = try run("dump", path, "--entity", "Holder")
        XCTAssertEqual(plain.status, 0, plain.err)
        XCTAssertTrue(plain.out.hasPrefix("Holder p1: name=\"h0\""), plain.out)
        let unknown = try run("dump", path, "--entity", "Nope")
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.err.contains("no entity Nope"), unknown.err)
    }

    func testDamagedPagesAreReportedWithExitOne() throws {
        let path = try makeStore()
        unchecked["tickets.store"] = "damaged on purpose"
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: 4096 * 3 + 100)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 64))
        try handle.close()
        let check = try run("check", path)
        XCTAssertEqual(check.status, 1, check.out + check.err)
        XCTAssertTrue(check.out.contains("problem"), check.out)
        XCTAssertTrue(check.out.contains("page 3"), check.out)
        let stats = try run("stats", path)
        XCTAssertNotEqual(stats.status, 1, "stats reports damage, it does not crash: \(stats.err)")
    }

    func testDamagedRecordsAreReportedWithExitOne() throws {
        let path = try makeStore()
        unchecked["tickets.store"] = "damaged on purpose"
        let database = try Database.open(path: path)
        try database.write { tx in
            let records = try tx.tree("e.Ticket")
            // Valid pages, bad records: a truncated varint, and a holder
            // that does not exist.
            try tx.put(Array([0, 0, 0, 0, 0, 0, 0, 7]), [1, 0x08, 0xFF], in: records)
            try tx.put(
                Array([0, 0, 0, 0, 0, 0, 0, 8]), [1, 0x02, 2, 0x54, 0x38, 0x08, 4, 0x10, 99, 0x19, 0, 0, 0, 0, 0, 0, 0, 0],
                in: records)
        }
        try database.close()
        let check = try run("check", path)
        XCTAssertEqual(check.status, 1, check.out + check.err)
        XCTAssertTrue(check.out.contains("e.Ticket row 7"), check.out)
        XCTAssertTrue(check.out.contains("e.Ticket row 8: holder points at missing row 99"), check.out)
    }

    func testMissingIndexEntriesAreReportedWithExitOne() throws {
        let path = try makeStore()
        unchecked["tickets.store"] = "damaged on purpose"
        let database = try Database.open(path: path)
        try database.write { tx in
            let unique = try tx.tree("u.Ticket.code")
            let reverse = try tx.tree("r.Ticket.holder")
            try tx.delete(try XCTUnwrap(tx.scan(unique).first?.key), in: unique)
            try tx.delete(try XCTUnwrap(tx.scan(reverse).last?.key), in: reverse)
        }
        try database.close()
        let check = try run("check", path)
        XCTAssertEqual(check.status, 1, check.out + check.err)
        XCTAssertTrue(check.out.contains("u.Ticket.code: 498 entries, expected 499"), check.out)
        XCTAssertTrue(check.out.contains("r.Ticket.holder: 498 entries, expected 499"), check.out)
    }

    func testBadPathsAndLockedStoresGetAMessageAndExitTwo() throws {
        let missing = try run("check", directory.file("nothing.store"))
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.err.contains("no store at"), missing.err)

        let garbage = directory.file("garbage.store")
        unchecked["garbage.store"] = "not a store"
        try Data(repeating: 7, count: 10_000).write(to: URL(fileURLWithPath: garbage))
        let notAStore = try run("stats", garbage)
        XCTAssertEqual(notAStore.status, 2, notAStore.out)
        XCTAssertTrue(notAStore.err.hasPrefix("strata: error:"), notAStore.err)

        let path = try makeStore()
        let holder = try Database.open(path: path)
        defer { try? holder.close() }
        let compact = try run("compact", path)
        XCTAssertEqual(compact.status, 2, compact.out)
        XCTAssertTrue(compact.err.contains("locked"), compact.err)
        // Read-only commands work on a store in use; so does backup.
        XCTAssertEqual(try run("check", path).status, 0)
        let backup = directory.file("backup.store")
        XCTAssertEqual(try run("backup", path, backup).status, 0)
        let copy = try ModelContainer(
            for: Schema([Ticket.self, Holder.self]), configurations: [ModelConfiguration(url: URL(fileURLWithPath: backup))])
        XCTAssertEqual(try ModelContext(copy).fetchCount(FetchDescriptor<Ticket>()), 499)
    }

    /// The read-only commands and `backup` run against a store another
    /// process (here: this one) saves to without pause, checkpoints and log
    /// restarts included: each reports a consistent snapshot. (Before the
    /// shared index, about half of the `check` runs reported damage that
    /// was not there and a read-only open never saw a later commit.)
    func testCommandsOnALiveStoreSeeConsistentSnapshots() throws {
        let path = try makeStore()
        let stop = StopFlag()
        let saver = Thread {
            do {
                var configuration = ModelConfiguration(url: URL(fileURLWithPath: path))
                configuration.durability = .normal
                let container = try ModelContainer(for: Schema([Ticket.self, Holder.self]), configurations: [configuration])
                var n = 0
                while !stop.isSet {
                    let context = ModelContext(container)
                    context.insert(Ticket(code: "live\(n)", seats: 1))
                    try context.save()
                    n += 1
                }
                stop.finish(saves: n, error: nil)
            } catch {
                stop.finish(saves: 0, error: error)
            }
        }
        saver.start()
        defer { stop.set() }
        var tickets: [Int] = []
        for round in 0..<6 {
            let check = try run("check", path)
            XCTAssertEqual(check.status, 0, "round \(round): \(check.out)\(check.err)")
            for command in ["stats", "history", "schema"] {
                let result = try run(command, path)
                XCTAssertEqual(result.status, 0, "round \(round), \(command): \(result.err)")
            }
            let dump = try run("dump", path, "--entity", "Ticket", "--json")
            XCTAssertEqual(dump.status, 0, "round \(round): \(dump.err)")
            tickets.append(dump.out.split(separator: "\n").count)
            let copy = directory.file("live-\(round).store")
            let backup = try run("backup", path, copy)
            XCTAssertEqual(backup.status, 0, "round \(round): \(backup.err)")
            let copied = try run("check", copy)
            XCTAssertEqual(copied.status, 0, "round \(round), the backup: \(copied.out)")
        }
        stop.set()
        let (saves, error) = stop.wait()
        XCTAssertNil(error)
        XCTAssertGreaterThan(saves, 0)
        XCTAssertEqual(tickets, tickets.sorted(), "each dump saw at least the tickets of the one before")
        XCTAssertGreaterThan(tickets.last ?? 0, tickets.first ?? 0, "the dumps saw the saves going on")
    }

    func testCompactInPlaceKeepsEveryRow() throws {
        let path = try makeStore()
        let compact = try run("compact", path)
        XCTAssertEqual(compact.status, 0, compact.err)
        XCTAssertTrue(compact.out.hasPrefix("compacted"), compact.out)
        XCTAssertEqual(try run("check", path).status, 0)
        let container = try ModelContainer(
            for: Schema([Ticket.self, Holder.self]), configurations: [ModelConfiguration(url: URL(fileURLWithPath: path))])
        let context = ModelContext(container)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Ticket>()), 499)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }
}

/// Tells a saving thread to stop, and waits for its result.
final class StopFlag: @unchecked Sendable {
    private let condition = NSCondition()
    private var stopped = false
    private var result: (saves: Int, error: (any Error)?)?

    var isSet: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }

    func set() {
        condition.lock()
        stopped = true
        condition.unlock()
    }

    func finish(saves: Int, error: (any Error)?) {
        condition.lock()
        result = (saves, error)
        condition.broadcast()
        condition.unlock()
    }

    func wait() -> (saves: Int, error: (any Error)?) {
        condition.lock()
        defer { condition.unlock() }
        while result == nil { condition.wait() }
        return result!
    }
}

/// Runs `executable` with `arguments`, and `environment` over this
/// process's; returns its exit status, stdout and stderr.
func runProcess(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws -> (
    status: Int32, out: String, err: String
) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if !environment.isEmpty {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, given in given }
    }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let output = out.fileHandleForReading.readDataToEndOfFile()
    let error = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self), String(decoding: error, as: UTF8.self))
}
