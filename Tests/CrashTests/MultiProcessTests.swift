import Foundation
import StrataEngine
import StrataTesting
import XCTest

/// Many processes on one store: writers that move money between accounts,
/// readers that check in every snapshot that it adds up, and a
/// checkpointer, all killed with SIGKILL at random and restarted. At the end
/// every acknowledged transfer is in the store, the invariant holds and
/// `check()` is clean.
///
/// `STRATA_STRESS_SECONDS` sets how long the crowd runs (default 20).
final class MultiProcessTests: CrashTestCase {
    static func workerExecutable() throws -> String { try executableBesideTests("strata-stress-worker") }

    /// One member of the crowd.
    final class Worker {
        let role: String
        let id: Int
        let output: String
        let errors: String
        var process: Process?

        init(role: String, id: Int, directory: TemporaryDirectory) {
            self.role = role
            self.id = id
            output = directory.file("\(role)-\(id).out")
            errors = directory.file("\(role)-\(id).err")
        }

        func start(_ executable: String, store: String) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = [role, store, "\(id)", output]
            _ = FileManager.default.createFile(atPath: errors, contents: nil)
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            self.process = process
        }

        /// What the worker wrote to standard error.
        var errorText: String { (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "" }

        /// Whole lines of its output file.
        var lines: [Substring] {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            var lines = text.split(separator: "\n", omittingEmptySubsequences: true)
            // A kill may cut the last line short.
            if !text.hasSuffix("\n"), !lines.isEmpty { lines.removeLast() }
            return lines
        }
    }

    static func encode(_ value: Int64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    static func decode(_ bytes: [UInt8]?) -> Int64? {
        guard let bytes, bytes.count == 8 else { return nil }
        return bytes.reduce(0) { $0 << 8 | Int64($1) }
    }

    func testWritersReadersAndCheckpointersOfManyProcessesSurviveKills() throws {
        let executable = try Self.workerExecutable()
        let directory = temporaryDirectory(prefix: "strata-crowd")
        let store = directory.file("store.strata")
        leave(store)
        let seconds = Double(ProcessInfo.processInfo.environment["STRATA_STRESS_SECONDS"] ?? "") ?? 20
        let seed = SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "multi-process stress")
        var random = SeededRandom(seed: seed)

        let accounts = 32
        do {
            let db = try Database.open(path: store)
            try db.write { tx in
                let tree = try tx.createTree("accounts")
                for i in 0..<accounts { try tx.put(Array("acct\(i)".utf8), Self.encode(1000), in: tree) }
                try tx.createTree("ledger")
                try tx.createTree("meta")
            }
            try db.close()
        }

        var workers: [Worker] = []
        for id in 0..<4 { workers.append(Worker(role: "transfer", id: id, directory: directory)) }
        for id in 4..<8 { workers.append(Worker(role: "read", id: id, directory: directory)) }
        workers.append(Worker(role: "checkpoint", id: 8, directory: directory))
        for worker in workers { try worker.start(executable, store: store) }

        var kills: [String: Int] = [:]
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            usleep(UInt32(50_000 + random.choose(250_000)))
            // A worker that stopped by itself failed.
            for worker in workers where worker.process?.isRunning == false {
                XCTFail("seed \(seed): \(worker.role) \(worker.id) exited: \(worker.errorText)")
                try worker.start(executable, store: store)
            }
            let victim = workers[random.choose(workers.count)]
            guard let process = victim.process else { continue }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            kills[victim.role, default: 0] += 1
            try victim.start(executable, store: store)
        }
        for worker in workers {
            if let process = worker.process {
                if !process.isRunning {
                    XCTFail("seed \(seed): \(worker.role) \(worker.id) exited: \(worker.errorText)")
                }
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }

        let db = try Database.open(path: store)
        defer { try? db.close() }
        let report = try db.check()
        XCTAssertTrue(report.isHealthy, "seed \(seed):\n\(report)")
        var acknowledged = 0
        var verifiedReads = 0
        try db.read { tx in
            let accountsTree = try tx.tree("accounts")
            var sum: Int64 = 0
            for i in 0..<accounts { sum += Self.decode(try tx.get(Array("acct\(i)".utf8), in: accountsTree)) ?? 0 }
            XCTAssertEqual(sum, Int64(accounts) * 1000, "seed \(seed): money appeared or vanished")
            let ledger = try tx.tree("ledger")
            let transfers = Self.decode(try tx.get(Array("transfers".utf8), in: try tx.tree("meta"))) ?? 0
            XCTAssertEqual(Int64(try tx.count(ledger)), transfers, "seed \(seed)")
            for worker in workers where worker.role == "transfer" {
                var seen = Set<Substring>()
                for key in worker.lines {
                    acknowledged += 1
                    XCTAssertNotNil(try tx.get(Array(key.utf8), in: ledger), "seed \(seed): acknowledged \(key) lost")
                    // A key acknowledged twice: the counter that names it
                    // went back, so a commit was lost and redone.
                    XCTAssertTrue(seen.insert(key).inserted, "seed \(seed): \(key) acknowledged twice")
                }
            }
        }
        for worker in workers where worker.role == "read" {
            verifiedReads += worker.lines.compactMap { Int($0.dropFirst(3)) }.reduce(0, +) > 0 ? 1 : 0
        }
        let readChecks = workers.filter { $0.role == "read" }.reduce(0) { $0 + $1.lines.count * 200 }
        XCTAssertGreaterThan(acknowledged, 100, "seed \(seed): the writers made progress")
        XCTAssertGreaterThan(readChecks, 1000, "seed \(seed): the readers checked snapshots")
        XCTAssertGreaterThan(kills["transfer", default: 0], 0)
        XCTAssertGreaterThan(kills["read", default: 0], 0)
        print(
            "multi-process stress: \(seconds) s, seed \(seed), kills \(kills), \(acknowledged) acknowledged transfers, over \(readChecks) snapshots checked"
        )
        _ = verifiedReads
    }
}
