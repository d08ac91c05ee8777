import Foundation
import StrataEngine
import StrataTesting
import XCTest

/// A child process commits in a loop and is killed with SIGKILL at random
/// moments; after each kill the store must hold every acknowledged commit,
/// nothing partial, and pass `check()`.
///
/// `STRATA_KILLS` sets the number of kills (default 24).
final class ProcessKillTests: CrashTestCase {
    func writerExecutable() throws -> String { try executableBesideTests("strata-crash-writer") }

    func value(_ n: Int) -> [UInt8] {
        [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: n % 10 == 0 ? 10_000 : 40 + n % 200)
    }

    func testKilledWriterLosesNoAcknowledgedCommit() throws {
        let writer = try writerExecutable()
        let directory = temporaryDirectory(prefix: "strata-kill")
        let store = directory.file("store.strata")
        leave(store)
        let kills = Int(ProcessInfo.processInfo.environment["STRATA_KILLS"] ?? "") ?? 24
        let seed = SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "process kill")
        var random = SeededRandom(seed: seed)
        var lastAcknowledged = -1
        for round in 0..<kills {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: writer)
            process.arguments = [store]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            usleep(UInt32(20_000 + random.choose(200_000)))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let acks = text.split(separator: "\n").compactMap { line -> Int? in
                line.hasPrefix("ack ") ? Int(line.dropFirst(4)) : nil
            }
            if let last = acks.last { lastAcknowledged = last }

            let db = try Database.open(path: store)
            let report = try db.check()
            XCTAssertTrue(report.isHealthy, "round \(round), seed \(seed):\n\(report)")
            try db.read { tx in
                // A writer killed before its first commit returned leaves a
                // store without the tree, which is right only if nothing
                // was acknowledged yet.
                guard let t = try tx.treeIfPresent("t") else {
                    XCTAssertEqual(lastAcknowledged, -1, "round \(round), seed \(seed): acknowledged commits lost")
                    return
                }
                let next = Int(String(decoding: try tx.get(Array("next".utf8), in: t) ?? [], as: UTF8.self)) ?? 0
                // Acknowledged commits are all there; at most the one in flight
                // beyond them.
                XCTAssertGreaterThanOrEqual(next, lastAcknowledged + 1, "round \(round), seed \(seed)")
                XCTAssertLessThanOrEqual(next, lastAcknowledged + 2, "round \(round), seed \(seed)")
                XCTAssertEqual(try tx.count(t), next + 1, "round \(round): one key per commit plus \"next\"")
                for n in 0..<next where n % 7 == 0 || n >= lastAcknowledged - 5 {
                    XCTAssertEqual(try tx.get(Array("k\(n)".utf8), in: t), value(n), "round \(round): key \(n)")
                }
                XCTAssertNil(try tx.get(Array("k\(next)".utf8), in: t))
                lastAcknowledged = next - 1
            }
            try db.close()
        }
        XCTAssertGreaterThan(lastAcknowledged, kills, "the writer made progress between kills")
        print("process kill: \(kills) kills, \(lastAcknowledged + 1) commits verified")
    }
}
