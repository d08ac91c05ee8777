import StrataEngine

/// Where a store's reads and saves go. A store opened on a file reads
/// from snapshots and saves in write transactions of its own
/// (``DatabaseTarget``); a migration stage's store reads and writes through
/// the migration's one open transaction, which the migration commits as a
/// whole (``MigrationTarget``). The store asks its target, and never which
/// kind it is.
protocol SaveTarget: AnyObject {
    /// Runs `body` in a read transaction.
    func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R

    /// Begins a save's write transaction.
    func begin() throws -> WriteTransaction

    /// Commits a save's write transaction.
    func commit(_ tx: WriteTransaction) throws

    /// Ends a save's write transaction that will not commit: `error` made
    /// the save fail, or (nil) the save had nothing to write.
    func abandon(_ tx: WriteTransaction, after error: (any Error)?)

    /// True when the store is the file's own: it takes snapshots that
    /// outlive one call (a batched fetch holds one), merges other
    /// processes' saves, and closing it closes the file.
    var ownsFile: Bool { get }
}

/// A store opened on a file: its own snapshots and write transactions.
final class DatabaseTarget: SaveTarget {
    let database: Database

    init(_ database: Database) { self.database = database }

    @inline(__always) func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R { try database.read(body) }
    func begin() throws -> WriteTransaction { try database.beginWrite() }
    func commit(_ tx: WriteTransaction) throws { try tx.commit() }
    func abandon(_ tx: WriteTransaction, after error: (any Error)?) { tx.rollback() }
    var ownsFile: Bool { true }
}

/// A migration stage's store: every read and save goes through the
/// migration's open write transaction, whose uncommitted writes a stage's
/// fetches must see, and which the migration commits or rolls back as a
/// whole. A save that fails part way leaves its partial writes in that
/// transaction, so the migration must fail even if the stage's code caught
/// the error: ``failure`` keeps the first.
final class MigrationTarget: SaveTarget {
    let transaction: WriteTransaction
    /// The first error of a save or write through ``transaction`` (a
    /// migration runs on one thread).
    private(set) var failure: (any Error)?

    init(_ transaction: WriteTransaction) { self.transaction = transaction }

    func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R { try body(transaction) }
    func begin() throws -> WriteTransaction { transaction }
    func commit(_ tx: WriteTransaction) throws {}
    func abandon(_ tx: WriteTransaction, after error: (any Error)?) {
        if let error, failure == nil { failure = error }
    }
    var ownsFile: Bool { false }
}
