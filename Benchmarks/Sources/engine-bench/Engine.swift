import BenchSupport

/// How hard each commit works to survive a power loss, for a whole run.
/// Each engine maps it to its own setting (see ``StrataStore`` and
/// ``SQLiteStore``).
enum DurabilityLevel: String, CaseIterable {
    /// Strata `.full` / SQLite `synchronous=FULL`: every commit syncs the log.
    case full
    /// Strata `.normal` / SQLite `synchronous=NORMAL`: the log is synced at
    /// checkpoints only.
    case normal
    /// Strata `.none` / SQLite `synchronous=OFF`: nothing is ever synced.
    case none
}

/// One storage engine under test, holding a single key-value table.
///
/// Each method is one whole workload: the harness times the call, so the
/// inner loops run on concrete types without dynamic dispatch per entry.
/// Every method checks its own results and throws ``BenchError`` when the
/// engine returned something unexpected.
protocol KeyValueEngine: AnyObject {
    /// Name for the report.
    var name: String { get }
    /// The main file; its write-ahead log is `path + "-wal"` for both engines.
    var path: String { get }

    /// Inserts every `(keys[i], values[i])` in one transaction.
    func bulkLoad(_ data: Dataset) throws
    /// Reads every key in `data.readOrder` order in one read transaction.
    func pointReads(_ data: Dataset) throws
    /// Reads every entry in key order in one read transaction.
    func scan() throws -> ScanDigest
    /// Puts each of `data.commitKeys` in a transaction of its own.
    func singleCommits(_ data: Dataset) throws
    /// Deletes every key of `data.deleteOrder` in one transaction.
    func deletes(_ data: Dataset) throws
    /// Closes the store (both engines checkpoint their log here).
    func close() throws
}

/// Checks that a point-read workload found every key with a full value.
func checkReads(_ engine: String, found: Int, bytes: Int, _ data: Dataset) throws {
    let expected = data.readOrder.count
    guard found == expected, bytes == expected * Dataset.valueLength else {
        throw BenchError("\(engine): point reads found \(found) of \(expected) keys (\(bytes) value bytes)")
    }
}
