import StrataEngine
import StrataTesting
import XCTest

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Every engine test ends with an integrity check of every store it used.
///
/// Each store a test opens — through ``open(_:_:)``, `Database.open`
/// directly, a reopen after a simulated crash, a `compact` target — is
/// recorded (by `Database.openObserver`). At tear-down each handle still
/// open is checked and closed, then each store (path and file system) is
/// opened again read-only and checked: a store the test closed is checked
/// too, as the next open would find it. A failing or throwing check fails
/// the test. A test that damages a store on purpose exempts it with
/// ``expectDamaged(_:because:)``.
class EngineTestCase: XCTestCase {
    var directory: TemporaryDirectory!
    private var stores: StoreRegistry!

    override func setUp() {
        super.setUp()
        directory = TemporaryDirectory(prefix: "strata-test")
        let stores = StoreRegistry()
        self.stores = stores
        Database.openObserver = { stores.add($0) }
    }

    override func tearDown() {
        Database.openObserver = nil
        stores.checkAll()
        directory.remove()
        super.tearDown()
    }

    /// Opens (creating) `name` in the test directory.
    func open(_ name: String = "store.strata", _ options: DatabaseOptions = DatabaseOptions()) throws -> Database {
        try Database.open(path: directory.file(name), options: options)
    }

    /// Opens with a given file system.
    func open(_ path: String, options: DatabaseOptions = DatabaseOptions(), fileSystem: any StorageFileSystem) throws -> Database
    {
        try Database.open(path: path, options: options, fileSystem: fileSystem)
    }

    /// Checks that tree `name` of `db` holds exactly `expected` (in key
    /// order): its count, each entry a cursor meets, then a check of the
    /// whole store. `context` goes into every failure's message.
    func assertTree(
        _ db: Database, _ name: String = "t", holds expected: [(key: [UInt8], value: [UInt8])], context: String = "",
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        try db.read { tx in
            let tree = try tx.tree(name)
            XCTAssertEqual(try tx.count(tree), expected.count, context, file: file, line: line)
            let cursor = try tx.cursor(tree)
            var more = try cursor.first()
            var i = 0
            while more, i < expected.count {
                XCTAssertEqual(try cursor.key(), expected[i].key, "\(context) entry \(i)", file: file, line: line)
                XCTAssertEqual(try cursor.value(), expected[i].value, "\(context) entry \(i)", file: file, line: line)
                i += 1
                more = try cursor.next()
            }
            XCTAssertFalse(more, "\(context) more entries than expected", file: file, line: line)
            XCTAssertEqual(i, expected.count, context, file: file, line: line)
        }
        let report = try db.check()
        XCTAssertTrue(report.isHealthy, "\(context) \(report)", file: file, line: line)
    }

    /// Leaves the store at `path` (on any file system) out of the
    /// tear-down check: the test damaged it on purpose, for `reason`.
    func expectDamaged(_ path: String, because reason: String) {
        stores.exempt(path, reason)
    }
}

/// The stores a test opened, and their check at tear-down.
final class StoreRegistry: @unchecked Sendable {
    private struct Opened {
        weak var handle: Database?
        let path: String
        let fileSystem: any StorageFileSystem
        /// The handle's locking mode, which the reopening uses too.
        let locking: LockingMode
        /// Identifies the store: its path and, for a file system that is an
        /// object (a simulated one), that object.
        let key: String
    }

    private let lock = Lock()
    private var opened: [Opened] = []
    private var exempted: [String: String] = [:]

    func add(_ db: Database) {
        let fs = db.fileSystem
        let owner = type(of: fs) is AnyObject.Type ? "\(ObjectIdentifier(fs as AnyObject))" : "\(type(of: fs))"
        lock.withLock {
            opened.append(
                Opened(handle: db, path: db.path, fileSystem: fs, locking: db.options.locking, key: owner + ":" + db.path))
        }
    }

    func exempt(_ path: String, _ reason: String) {
        lock.withLock { exempted[path] = reason }
    }

    /// Checks and closes every handle still open, then reopens every store
    /// read-only and checks it; failures are test failures.
    func checkAll() {
        let (opened, exempted) = lock.withLock { (self.opened, self.exempted) }
        for entry in opened {
            guard let db = entry.handle else { continue }
            let checked = exempted[entry.path] == nil
            if checked {
                do {
                    let report = try db.check()
                    XCTAssertTrue(report.isHealthy, "check() of the open handle of \(entry.path) after the test:\n\(report)")
                } catch StorageError.closed {
                    // Closed by the test: the reopened store is checked below.
                } catch {
                    XCTFail("check() of the open handle of \(entry.path) threw after the test: \(error)")
                }
            }
            do {
                try db.close()
            } catch {
                if checked { XCTFail("closing \(entry.path) after the test threw: \(error)") }
            }
        }
        var seen: Set<String> = []
        for entry in opened where exempted[entry.path] == nil && seen.insert(entry.key).inserted {
            // A store the test removed has nothing left to check.
            guard entry.fileSystem.exists(entry.path) else { continue }
            do {
                let db = try Database.open(
                    path: entry.path, options: DatabaseOptions(readOnly: true, locking: entry.locking),
                    fileSystem: entry.fileSystem)
                defer { try? db.close() }
                let report = try db.check()
                XCTAssertTrue(report.isHealthy, "check() of \(entry.path), reopened after the test:\n\(report)")
            } catch {
                XCTFail("reopening and checking \(entry.path) after the test threw: \(error)")
            }
        }
    }
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
