import Synchronization

/// The container's store: the engine database, one tree per entity, and
/// the stored schema.
///
/// Layout in the engine (the "Object mapping" article lists every tree):
/// - tree `strata.schema`: entity name → the entity's stored description;
/// - tree `e.<Entity>`: row id (8 bytes, big-endian) → record;
/// - trees `u.<Entity>.<a>+<b>` and `i.<Entity>.<a>+<b>`: unique
///   constraints and indexes (see ``KeyGroup``);
/// - trees `r.`, `j.` and `m.<Entity>.<field>`: relationships (see
///   ``RelationshipStorage``).
///
/// Row ids are allocated from a counter per entity, initialized from the
/// entity tree's last key at open. They are handed out at `insert`, so an
/// identifier is permanent from the moment a model is inserted — unless
/// the save upserts it into a stored row with the same unique values, when
/// it takes that row's identifier. Ids of inserts that are rolled back or
/// upserted are not reused. Stored row ids run from 1 to `Int64.max`: a
/// last key outside that range (a damaged tree) fails the open with
/// ``SwiftDataError/corruptRecord``, and an entity whose last row is
/// `Int64.max` gets no more rows (see ``allocateRow(_:)``).
package final class Store: @unchecked Sendable {
    let database: Database
    package let identifier: String
    package let allowsSave: Bool
    /// Whether saves record history (``ModelConfiguration/recordsHistory``;
    /// a migration stage's saves record none).
    package let recordsHistory: Bool
    let schema: Schema
    /// Carries each context's saves to the store's other contexts.
    let mergeHub = MergeHub()
    /// What this store's contexts have seen of other processes' saves.
    let otherProcesses = OtherProcesses()
    /// Each entity's last row id, by the entity's ordinal in ``schema``.
    private let nextRows: Locked<[Int64]>
    /// Set once an entity's row ids ran out (``allocateRow(_:)`` returned
    /// 0): saves then check that they write no row 0.
    private let rowsExhausted = Atomic<Bool>(false)

    static func treeName(_ entity: Schema.Entity) -> String { entity.recordTree }

    /// The tree of the entity named `entityName` (a model class's name).
    static func treeName(entityName: String) -> String { TreeName.records(entityName) }

    /// Where reads and saves go: the file's own transactions, or a
    /// migration's open one (see ``SaveTarget``).
    let target: any SaveTarget

    init(
        configuration: ModelConfiguration, schema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
        progress: (@Sendable (MigrationProgress) -> Void)? = nil
    ) throws {
        self.schema = schema
        self.allowsSave = configuration.allowsSave
        self.recordsHistory = configuration.recordsHistory
        var options = DatabaseOptions()
        options.durability = configuration.durability
        options.busyTimeout = configuration.busyTimeout
        options.readOnly = !configuration.allowsSave && !configuration.isStoredInMemoryOnly
        var fallbackIdentifier: String
        if let fileSystem = configuration.fileSystem {
            database = try Database.open(path: configuration.url.path, options: options, fileSystem: fileSystem)
            fallbackIdentifier = configuration.url.path
        } else if configuration.isStoredInMemoryOnly {
            database = try Database.open(path: "memory.store", options: options, fileSystem: MemoryFileSystem())
            fallbackIdentifier = "memory-" + UUID().uuidString
        } else {
            let path = SharedStores.key(for: configuration) ?? configuration.url.path
            if !options.readOnly {
                try? FileManager.default.createDirectory(
                    at: configuration.url.deletingLastPathComponent(), withIntermediateDirectories: true)
            }
            // A large save returns once its commit is durable; the copy of
            // its pages into the main file follows on a thread of its own
            // (a save of 10,000 changed models: about 6 of its 24 ms). Not
            // on Apple's systems: there an app suspended while that thread
            // holds the store's file locks in a shared container is ended
            // by the system, and the thread would need a QoS of its own.
            #if os(Linux)
                options.checkpointsInBackground = true
            #endif
            database = try Database.open(path: path, options: options)
            fallbackIdentifier = path
        }
        target = DatabaseTarget(database)
        do {
            let migrator = Migrator(
                database: database, schema: schema, plan: migrationPlan, writable: !options.readOnly, progress: progress)
            try migrator.prepare()
            let (rows, lastToken) = try database.read { tx in
                (try Self.lastRows(tx, schema: schema), try HistoryLog.lastToken(tx))
            }
            nextRows = Locked(rows)
            // Saves before the open are no other process's news.
            otherProcesses.seen.withLock { $0.token = lastToken }
            identifier = try Self.storedIdentifier(database, writable: !options.readOnly) ?? fallbackIdentifier
            // Only a store on a file has other processes to watch.
            if !configuration.isStoredInMemoryOnly {
                mergeHub.firstObserverRegistered = { [weak self] in self?.watchOtherProcesses() }
            }
        } catch {
            try? database.close()
            throw error
        }
    }

    /// The tree holding the store's identifier (a UUID made when the store
    /// is first opened writable), so that identifiers survive the file
    /// moving, as an app's container does when the app is updated.
    static let identityTree = TreeName.identity
    private static let identifierKey = Array("identifier".utf8)

    /// The store's identifier, made and stored when the store has none and
    /// can be written; nil for a read-only store that has none (its path
    /// is used then).
    private static func storedIdentifier(_ database: Database, writable: Bool) throws -> String? {
        let stored = try database.read { tx in
            try tx.treeIfPresent(identityTree).flatMap { try tx.get(identifierKey, in: $0) }
        }
        if let stored { return String(decoding: stored, as: UTF8.self) }
        guard writable else { return nil }
        let made = UUID().uuidString
        try database.write { tx in
            let tree = try tx.treeIfPresent(identityTree) ?? tx.createTree(identityTree)
            try tx.put(identifierKey, Array(made.utf8), in: tree)
        }
        return made
    }

    /// A migration stage's store: `schema` (a version of the plan) over the
    /// migration's open write transaction.
    init(migrating database: Database, in tx: WriteTransaction, schema: Schema, identifier: String) throws {
        self.database = database
        self.target = MigrationTarget(tx)
        self.schema = schema
        self.allowsSave = true
        self.recordsHistory = false
        self.identifier = identifier + "#migration"
        nextRows = Locked(try Self.lastRows(tx, schema: schema))
    }

    /// Runs `body` in a read transaction of the store's target.
    @inline(__always) package func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R {
        try target.read(body)
    }

    /// Runs `body` in a write transaction of the store's target that
    /// commits when it returns.
    package func write<R>(_ body: (WriteTransaction) throws -> R) throws -> R {
        let tx = try target.begin()
        do {
            let result = try body(tx)
            try refuseUnallocatedRows(tx)
            try target.commit(tx)
            return result
        } catch {
            target.abandon(tx, after: error)
            throw error
        }
    }

    /// The first failed write of a migration stage's store: the migration
    /// fails as a whole (see ``MigrationTarget``).
    var migrationFailure: (any Error)? { (target as? MigrationTarget)?.failure }

    /// Starts a save's write transaction. The save then calls
    /// ``checkSave(_:)`` and commits through ``target``, or calls
    /// ``abandonSave(_:after:)``.
    func beginSave() throws -> WriteTransaction {
        try target.begin()
    }

    /// Throws what would make the save's writes wrong to commit.
    func checkSave(_ tx: WriteTransaction) throws {
        try refuseUnallocatedRows(tx)
    }

    /// Ends a save's transaction that will not commit: `error` made it
    /// fail, or (nil) it had nothing to write.
    func abandonSave(_ tx: WriteTransaction, after error: (any Error)?) {
        target.abandon(tx, after: error)
    }

    /// Throws when the transaction wrote a record for row 0: a model
    /// inserted after its entity's row ids ran out. The write then commits
    /// nothing.
    private func refuseUnallocatedRows(_ tx: WriteTransaction) throws {
        guard rowsExhausted.load(ordering: .relaxed) else { return }
        let last = nextRows.withLock { $0 }
        for entity in schema.entities where last[entity.ordinal] == entity.lastRowID {
            guard let tree = try tx.treeIfPresent(entity.recordTree), try tx.get(RowKey.encode(0), in: tree) != nil
            else { continue }
            throw SwiftDataError(
                .corruptRecord,
                "\(entity.name): no row id is left for an insert (the last stored row is \(Int64.max)); "
                    + "the store is probably damaged: check it, or copy the models into a new store")
        }
    }

    /// Each entity's last row id, by ordinal.
    ///
    /// - Throws: ``SwiftDataError/corruptRecord`` naming the entity when
    ///   its tree's last key is not a row id from 1 to `Int64.max` (keys
    ///   sort as unsigned big-endian bytes, so a negative row id, had one
    ///   been written, would be the last key).
    private static func lastRows(_ tx: ReadTransaction, schema: Schema) throws -> [Int64] {
        var rows = [Int64](repeating: 0, count: schema.entities.count)
        for entity in schema.entities {
            // A subentity's rows carry its tag (`Schema.Entity.rowTag`).
            var last = entity.rowBase
            if let tree = try tx.treeIfPresent(treeName(entity)) {
                let cursor = try tx.cursor(tree)
                if try cursor.last() {
                    let key = try cursor.key()
                    let row = try? RowKey.decode(key)
                    guard let row, row > entity.rowBase, row <= entity.lastRowID else {
                        let shown = row.map { "row \($0)" } ?? "a key of \(key.count) bytes"
                        throw SwiftDataError(
                            .corruptRecord,
                            "\(entity.name): the last key of \(treeName(entity)) is \(shown), not a row id from "
                                + "\(entity.rowBase + 1) to \(entity.lastRowID)")
                    }
                    last = row
                }
            }
            rows[entity.ordinal] = last
        }
        return rows
    }

    /// A new row id for `entity` (an entity of this store's schema), or 0
    /// — no row, as before an insert — when its row ids have run out (its
    /// last row is `Int64.max`, which only a damaged store reaches). The
    /// insert cannot throw; a save that would write row 0 throws
    /// ``SwiftDataError/corruptRecord`` naming the entity, and commits
    /// nothing (see ``write(_:)``).
    func allocateRow(_ entity: Schema.Entity) -> Int64 {
        nextRows.withLock { rows in
            guard rows[entity.ordinal] < entity.lastRowID else {
                rowsExhausted.store(true, ordering: .relaxed)
                return 0
            }
            rows[entity.ordinal] += 1
            return rows[entity.ordinal]
        }
    }

    /// Makes later row ids of `entity` exceed `row`: another process saved
    /// rows up to it (every process allocates from its own counter).
    func raiseRowFloor(_ entity: Schema.Entity, to row: Int64) {
        nextRows.withLock { rows in rows[entity.ordinal] = max(rows[entity.ordinal], row) }
    }

    /// Closes the store now, also for other containers that share it (a
    /// container on the file opened later opens it again).
    func close() {
        // A migration stage's store is never shared, and is made while the
        // shared stores' lock is held.
        if target.ownsFile { SharedStores.forget(self) }
        closeDatabase()
    }

    func closeDatabase() {
        if target.ownsFile { try? database.close() }
    }
}

/// Row keys: the row id as 8 big-endian bytes, so key order is row order.
package enum RowKey {
    package static func encode(_ row: Int64) -> [UInt8] {
        // A literal filled in place: `init(unsafeUninitializedCapacity:)`
        // allocates through the standard library's unspecialized path
        // (about 800 instructions for these 8 bytes, 400 this way).
        var key: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0]
        key.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(bitPattern: row).bigEndian, as: UInt64.self) }
        return key
    }

    /// Appends the key of `row` to `batch`.
    static func append(_ row: Int64, to batch: inout KeyBatch) {
        batch.append(count: 8) { $0.storeBytes(of: UInt64(bitPattern: row).bigEndian, as: UInt64.self) }
    }

    package static func decode(_ key: [UInt8]) throws -> Int64 {
        guard key.count == 8 else { throw SwiftDataError(.corruptRecord, "a row key of \(key.count) bytes") }
        var value: UInt64 = 0
        for byte in key { value = value << 8 | UInt64(byte) }
        return Int64(bitPattern: value)
    }

    /// Inlined: a scan decodes the key of every row it passes.
    @inline(__always) static func decode(_ key: UnsafeRawBufferPointer) throws -> Int64 {
        guard key.count == 8, let base = key.baseAddress else { throw badKey(key.count) }
        return Int64(bitPattern: UInt64(bigEndian: base.loadUnaligned(as: UInt64.self)))
    }

    @inline(never) private static func badKey(_ count: Int) -> SwiftDataError {
        SwiftDataError(.corruptRecord, "a row key of \(count) bytes")
    }
}
