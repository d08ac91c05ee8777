import StrataEngine
import StrataTesting
import XCTest

/// The crash suites' tear-down check, as every other suite has one: the
/// store each test leaves (``leave(_:fileSystem:)``: the file killed
/// processes wrote, the last image a matrix recovered and committed to) is
/// reopened read-only after the test and must pass `check()`. The suites
/// check every recovered image inline as well, right after its recovery
/// and again after a commit on it; the tear-down sees the store as the
/// next open would.
class CrashTestCase: XCTestCase {
    private var left: [String: any StorageFileSystem] = [:]
    private var directories: [TemporaryDirectory] = []

    /// Checks the store at `path` on `fileSystem` at tear-down; a later
    /// call for the same path replaces it (a matrix leaves one image).
    func leave(_ path: String, fileSystem: any StorageFileSystem = POSIXFileSystem()) {
        left[path] = fileSystem
    }

    /// A temporary directory removed after the tear-down check.
    func temporaryDirectory(prefix: String) -> TemporaryDirectory {
        let directory = TemporaryDirectory(prefix: prefix)
        directories.append(directory)
        return directory
    }

    override func tearDown() {
        for (path, fileSystem) in left.sorted(by: { $0.key < $1.key }) {
            do {
                let db = try Database.open(path: path, options: DatabaseOptions(readOnly: true), fileSystem: fileSystem)
                defer { try? db.close() }
                let report = try db.check()
                XCTAssertTrue(report.isHealthy, "tear-down: check() of \(path):\n\(report)")
            } catch {
                XCTFail("tear-down: opening and checking \(path) threw \(error)")
            }
        }
        left = [:]
        for directory in directories { directory.remove() }
        directories = []
        super.tearDown()
    }
}
