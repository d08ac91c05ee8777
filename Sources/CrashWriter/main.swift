// strata-crash-writer PATH
//
// A helper for the process-kill tests: commits forever, with durability
// `full`, and prints "ack N" after commit N returns. Commit N stores key N
// (value: `CrashWriterData.value(N)`) and sets "next" to N + 1; a restarted
// writer continues from "next".
import StrataEngine

#if canImport(Glibc)
    import Glibc
#endif

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    printError("usage: strata-crash-writer PATH")
    exit(2)
}
do {
    var options = DatabaseOptions(durability: .full)
    options.checkpointThresholdFrames = 64
    let db = try Database.open(path: arguments[1], options: options)
    var n = try db.read { tx -> Int in
        guard let t = try tx.treeIfPresent("t"), let next = try tx.get(Array("next".utf8), in: t) else { return 0 }
        return Int(String(decoding: next, as: UTF8.self)) ?? 0
    }
    while true {
        try db.write { tx in
            let t = try tx.createTree("t")
            try tx.put(Array("k\(n)".utf8), crashWriterValue(n), in: t)
            try tx.put(Array("next".utf8), Array("\(n + 1)".utf8), in: t)
        }
        print("ack \(n)")
        fflush(nil)
        n += 1
    }
} catch {
    printError("strata-crash-writer: \(error)")
    exit(1)
}

/// The value of commit `n`: some span overflow pages.
func crashWriterValue(_ n: Int) -> [UInt8] {
    [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: n % 10 == 0 ? 10_000 : 40 + n % 200)
}

/// Writes a line to standard error.
func printError(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
