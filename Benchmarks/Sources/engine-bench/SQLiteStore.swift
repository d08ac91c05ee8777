import BenchSupport
import Foundation
import GRDB

/// SQLite through GRDB: one `WITHOUT ROWID` table keyed by a BLOB, used only
/// through prepared statements with bound arguments.
///
/// Settings matched to ``StrataStore``: WAL journal, `synchronous` from the
/// run's durability level, a 64 MiB page cache (Strata's default budget),
/// and SQLite's default 4 KiB pages and auto-checkpoint every 1000 pages.
final class SQLiteStore: KeyValueEngine {
    let name = "SQLite (GRDB)"
    let path: String
    /// The SQLite library version, for the report.
    let sqliteVersion: String
    private let queue: DatabaseQueue

    /// Creates a new database at `path`.
    init(path: String, durability: DurabilityLevel) throws {
        self.path = path
        let synchronous =
            switch durability {
            case .full: "FULL"
            case .normal: "NORMAL"
            case .none: "OFF"
            }
        var config = Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            try db.execute(sql: "PRAGMA cache_size = -65536")  // KiB: 64 MiB
        }
        queue = try DatabaseQueue(path: path, configuration: config)
        let (mode, version, level) = try queue.read { db in
            (
                try String.fetchOne(db, sql: "PRAGMA journal_mode"), try String.fetchOne(db, sql: "SELECT sqlite_version()"),
                try Int.fetchOne(db, sql: "PRAGMA synchronous")
            )
        }
        sqliteVersion = version ?? "?"
        guard mode?.lowercased() == "wal" else {
            throw BenchError("\(name): journal_mode is \(mode ?? "nil"), expected wal")
        }
        let expected = ["OFF": 0, "NORMAL": 1, "FULL": 2][synchronous]
        guard level == expected else {
            throw BenchError("\(name): synchronous is \(level ?? -1), expected \(synchronous)")
        }
    }

    func bulkLoad(_ data: Dataset) throws {
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE kv (key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID")
            let insert = try db.makeStatement(sql: "INSERT INTO kv (key, value) VALUES (?, ?)")
            for i in data.keyData.indices {
                try insert.execute(arguments: [data.keyData[i], data.valueData[i]])
            }
        }
    }

    /// Reads each value in place (`withUnsafeData` on the cursor's row, as
    /// the scan does), as the other engines' sides do.
    func pointReads(_ data: Dataset) throws {
        let (found, bytes) = try queue.read { db in
            let select = try db.makeStatement(sql: "SELECT value FROM kv WHERE key = ?")
            var found = 0
            var bytes = 0
            for key in data.readKeyData {
                let rows = try Row.fetchCursor(select, arguments: [key])
                if let row = try rows.next() {
                    found += 1
                    bytes += try row.withUnsafeData(atIndex: 0) { $0?.count ?? 0 }
                }
            }
            return (found, bytes)
        }
        try checkReads(name, found: found, bytes: bytes, data)
    }

    func scan() throws -> ScanDigest {
        try queue.read { db in
            let select = try db.makeStatement(sql: "SELECT key, value FROM kv ORDER BY key")
            let rows = try Row.fetchCursor(select)
            var digest = ScanDigest()
            while let row = try rows.next() {
                // Reads both columns without copying, as Strata's side does.
                try row.withUnsafeData(atIndex: 0) { key in
                    try row.withUnsafeData(atIndex: 1) { value in
                        (key ?? Data()).withUnsafeBytes { k in
                            (value ?? Data()).withUnsafeBytes { v in digest.add(key: k, value: v) }
                        }
                    }
                }
            }
            return digest
        }
    }

    func singleCommits(_ data: Dataset) throws {
        for i in data.commitKeyData.indices {
            try queue.write { db in
                try db.cachedStatement(sql: "INSERT INTO kv (key, value) VALUES (?, ?)")
                    .execute(arguments: [data.commitKeyData[i], data.commitValueData[i]])
            }
        }
    }

    func deletes(_ data: Dataset) throws {
        let deleted = try queue.write { db in
            let delete = try db.makeStatement(sql: "DELETE FROM kv WHERE key = ?")
            var deleted = 0
            for i in data.deleteOrder {
                try delete.execute(arguments: [data.keyData[i]])
                deleted += db.changesCount
            }
            return deleted
        }
        guard deleted == data.deleteOrder.count else {
            throw BenchError("\(name): deleted \(deleted) of \(data.deleteOrder.count) existing keys")
        }
    }

    func close() throws {
        try queue.close()
    }
}
