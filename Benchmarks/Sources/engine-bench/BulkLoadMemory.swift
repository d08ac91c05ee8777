import BenchSupport
import Foundation
import StrataEngine

/// `engine-bench --bulk-load-only`: the 1M bulk load on Strata alone, with
/// its keys and values made on the fly from the dataset's seed (the same
/// entries, in the same order, as workload 1) so that the process holds
/// nothing but the engine; reports the load's time and the process's peak
/// resident memory (`VmHWM`).
enum BulkLoadMemory {
    static func run(count: Int, cacheBytes: Int, durability: DurabilityLevel, directory: String) throws -> String {
        let level: Durability =
            switch durability {
            case .full: .full
            case .normal: .normal
            case .none: .none
            }
        let path = directory + "/bulk.strata"
        let db = try Database.open(path: path, options: DatabaseOptions(durability: level, cacheSizeBytes: cacheBytes))
        let before = peakResidentBytes()
        let (_, elapsed) = try timed {
            try db.write { tx in
                let tree = try tx.createTree(StrataStore.treeName)
                var rng = SeededRandom(seed: Dataset.seed)
                for _ in 0..<count {
                    let key = rng.bytes(Dataset.keyLength)
                    try tx.put(key, rng.bytes(Dataset.valueLength), in: tree)
                }
            }
        }
        let peak = peakResidentBytes()
        let statistics = db.statistics
        let entries = try db.read { try $0.count(try $0.tree(StrataStore.treeName)) }
        try db.close()
        guard entries == count else { throw BenchError("the load holds \(entries) entries, not \(count)") }
        return """
            | entries | cache budget | load | peak RSS before the load | peak RSS after | pages spilled | spilled pages read back | store pages |
            |---|---|---|---|---|---|---|---|
            | \(Format.count(count)) | \(Format.bytes(Int64(cacheBytes))) | \(Format.time(elapsed.seconds)) \
            | \(Format.bytes(before)) | \(Format.bytes(peak)) | \(Format.count(statistics.spilledPages)) \
            | \(Format.count(statistics.spillReads)) | \(Format.count(statistics.pageCount)) |
            """
    }

    /// The process's peak resident set (`VmHWM` of `/proc/self/status`).
    static func peakResidentBytes() -> Int64? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int64($0) })
        else { return nil }
        return kilobytes * 1024
    }
}
