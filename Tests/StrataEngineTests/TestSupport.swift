import StrataEngine
import StrataTesting
import XCTest

/// Opens stores in a fresh temporary directory and, at tear-down, closes
/// them, runs `check()` on each (every engine test ends with an integrity
/// check), and removes the directory.
class EngineTestCase: XCTestCase {
    var directory: TemporaryDirectory!
    private var opened: [Database] = []

    override func setUp() {
        super.setUp()
        directory = TemporaryDirectory(prefix: "strata-test")
    }

    override func tearDown() {
        for db in opened {
            if let report = try? db.check() {
                XCTAssertTrue(report.isHealthy, "check() after the test:\n\(report)")
            }
            try? db.close()
        }
        opened.removeAll()
        directory.remove()
        super.tearDown()
    }

    /// Opens (creating) `name` in the test directory; checked at tear-down.
    func open(_ name: String = "store.strata", _ options: DatabaseOptions = DatabaseOptions()) throws -> Database {
        let db = try Database.open(path: directory.file(name), options: options)
        opened.append(db)
        return db
    }

    /// Opens with a given file system; checked at tear-down.
    func open(_ path: String, options: DatabaseOptions = DatabaseOptions(), fileSystem: any StorageFileSystem) throws -> Database
    {
        let db = try Database.open(path: path, options: options, fileSystem: fileSystem)
        opened.append(db)
        return db
    }

    func forget(_ db: Database) {
        opened.removeAll { $0 === db }
    }
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
