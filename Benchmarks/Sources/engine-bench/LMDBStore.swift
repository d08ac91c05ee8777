import BenchSupport
import CLMDB
import Foundation

/// LMDB (Debian's liblmdb), the memory-mapped copy-on-write B+tree, with
/// one unnamed database holding the data: the limit a B+tree reaches on
/// this machine.
///
/// Durability mapping: `full` is LMDB's default (a commit syncs the data
/// pages, then writes and syncs the meta page: every returned commit
/// survives a power loss); `normal` is `MDB_NOMETASYNC` (the meta page is
/// synced with the next commit: the newest commit may be lost, the store
/// stays consistent); `none` is `MDB_NOSYNC`. Reads go through LMDB's own
/// read-only mapping (its default, as Strata reads through its mapping).
/// The data file is `path` (`MDB_NOSUBDIR`), the lock file `path-lock`.
final class LMDBStore: KeyValueEngine {
    let name = "LMDB"
    let path: String
    /// The LMDB library version, for the report.
    let version: String
    private var env: OpaquePointer?
    private var dbi: MDB_dbi = 0

    /// Creates a new store at `path`.
    init(path: String, durability: DurabilityLevel) throws {
        self.path = path
        // "LMDB 0.9.24: (July 24, 2019)": the part before the colon.
        version = String(String(cString: mdb_version(nil, nil, nil)).prefix { $0 != ":" })
        try check(mdb_env_create(&env), "mdb_env_create")
        // Large enough for any run; the file grows only as pages are used.
        try check(mdb_env_set_mapsize(env, 64 << 30), "mdb_env_set_mapsize")
        var flags = UInt32(MDB_NOSUBDIR)
        switch durability {
        case .full: break
        case .normal: flags |= UInt32(MDB_NOMETASYNC)
        case .none: flags |= UInt32(MDB_NOSYNC)
        }
        try check(mdb_env_open(env, path, flags, 0o644), "mdb_env_open")
        try write { txn in try check(mdb_dbi_open(txn, nil, UInt32(MDB_CREATE), &dbi), "mdb_dbi_open") }
    }

    private func check(_ code: Int32, _ call: String) throws {
        guard code == 0 else { throw BenchError("\(name): \(call): \(String(cString: mdb_strerror(code)))") }
    }

    /// Runs `body` in a write transaction and commits it.
    private func write<R>(_ body: (OpaquePointer?) throws -> R) throws -> R {
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        do {
            let result = try body(txn)
            try check(mdb_txn_commit(txn), "mdb_txn_commit")
            return result
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
    }

    /// Runs `body` in a read-only transaction.
    private func read<R>(_ body: (OpaquePointer?) throws -> R) throws -> R {
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
        defer { mdb_txn_abort(txn) }
        return try body(txn)
    }

    private func put(_ txn: OpaquePointer?, _ key: [UInt8], _ value: [UInt8]) throws {
        var key = key
        var value = value
        try key.withUnsafeMutableBytes { k in
            try value.withUnsafeMutableBytes { v in
                var mk = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var mv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                try check(mdb_put(txn, dbi, &mk, &mv, 0), "mdb_put")
            }
        }
    }

    func bulkLoad(_ data: Dataset) throws {
        try write { txn in
            for i in data.keys.indices { try put(txn, data.keys[i], data.values[i]) }
        }
    }

    func pointReads(_ data: Dataset) throws {
        let (found, bytes) = try read { txn in
            var found = 0
            var bytes = 0
            for key in data.readKeys {
                var key = key
                let code = key.withUnsafeMutableBytes { k -> Int32 in
                    var mk = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                    var mv = MDB_val()
                    let code = mdb_get(txn, dbi, &mk, &mv)
                    if code == 0 {
                        found += 1
                        bytes += mv.mv_size
                    }
                    return code
                }
                if code != 0 && code != MDB_NOTFOUND { try check(code, "mdb_get") }
            }
            return (found, bytes)
        }
        try checkReads(name, found: found, bytes: bytes, data)
    }

    func scan() throws -> ScanDigest {
        try read { txn in
            var cursor: OpaquePointer?
            try check(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open")
            defer { mdb_cursor_close(cursor) }
            var digest = ScanDigest()
            var key = MDB_val()
            var value = MDB_val()
            var code = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
            while code == 0 {
                digest.add(
                    key: UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size),
                    value: UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size))
                code = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
            }
            if code != MDB_NOTFOUND { try check(code, "mdb_cursor_get") }
            return digest
        }
    }

    func singleCommits(_ data: Dataset) throws {
        for i in data.commitKeys.indices {
            try write { txn in try put(txn, data.commitKeys[i], data.commitValues[i]) }
        }
    }

    func deletes(_ data: Dataset) throws {
        let deleted = try write { txn in
            var deleted = 0
            for i in data.deleteOrder {
                var key = data.keys[i]
                let code = key.withUnsafeMutableBytes { k -> Int32 in
                    var mk = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                    return mdb_del(txn, dbi, &mk, nil)
                }
                if code == 0 { deleted += 1 } else if code != MDB_NOTFOUND { try check(code, "mdb_del") }
            }
            return deleted
        }
        guard deleted == data.deleteOrder.count else {
            throw BenchError("\(name): deleted \(deleted) of \(data.deleteOrder.count) existing keys")
        }
    }

    func close() throws {
        guard let env else { return }
        // A last sync, as the other engines' close checkpoints.
        try check(mdb_env_sync(env, 1), "mdb_env_sync")
        mdb_env_close(env)
        self.env = nil
    }
}
