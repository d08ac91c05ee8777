import BenchSupport
import StrataEngine

/// StrataEngine, through its public API, with one tree holding the data.
///
/// Options other than durability and the cache budget (`--cache-mib`) are
/// the engine defaults: 4 KiB pages and a checkpoint every 1000 log frames.
final class StrataStore: KeyValueEngine {
    static let treeName = "kv"

    let name = "Strata"
    let path: String
    private let db: Database

    /// Creates a new store at `path`.
    init(path: String, durability: DurabilityLevel, cacheBytes: Int) throws {
        self.path = path
        let level: Durability =
            switch durability {
            case .full: .full
            case .normal: .normal
            case .none: .none
            }
        db = try Database.open(path: path, options: DatabaseOptions(durability: level, cacheSizeBytes: cacheBytes))
    }

    func bulkLoad(_ data: Dataset) throws {
        try db.write { tx in
            let tree = try tx.createTree(Self.treeName)
            for i in data.keys.indices {
                try tx.put(data.keys[i], data.values[i], in: tree)
            }
        }
    }

    /// Reads each value in place (`withValue(for:in:_:)`), as LMDB's side
    /// does with `mdb_get`; neither copies it.
    func pointReads(_ data: Dataset) throws {
        let (found, bytes) = try db.read { tx in
            let tree = try tx.tree(Self.treeName)
            var found = 0
            var bytes = 0
            for key in data.readKeys {
                if let count = try tx.withValue(for: key, in: tree, { $0.count }) {
                    found += 1
                    bytes += count
                }
            }
            return (found, bytes)
        }
        try checkReads(name, found: found, bytes: bytes, data)
    }

    func scan() throws -> ScanDigest {
        try db.read { tx in
            let cursor = try tx.cursor(try tx.tree(Self.treeName))
            var digest = ScanDigest()
            var more = try cursor.first()
            while more {
                // Reads both straight from the page, as SQLite's side does.
                try cursor.withEntry { k, v in digest.add(key: k, value: v) }
                more = try cursor.next()
            }
            return digest
        }
    }

    func singleCommits(_ data: Dataset) throws {
        for i in data.commitKeys.indices {
            try db.write { tx in
                try tx.put(data.commitKeys[i], data.commitValues[i], in: try tx.tree(Self.treeName))
            }
        }
    }

    func deletes(_ data: Dataset) throws {
        let deleted = try db.write { tx in
            let tree = try tx.tree(Self.treeName)
            var deleted = 0
            for i in data.deleteOrder where try tx.delete(data.keys[i], in: tree) {
                deleted += 1
            }
            return deleted
        }
        guard deleted == data.deleteOrder.count else {
            throw BenchError("\(name): deleted \(deleted) of \(data.deleteOrder.count) existing keys")
        }
    }

    func close() throws {
        try db.close()
    }
}
