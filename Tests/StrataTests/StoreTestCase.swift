import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// A test case with a fresh temporary directory for its store files,
/// removed at tear-down.
class StoreTestCase: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = TemporaryDirectory()
    }

    override func tearDown() {
        directory.remove()
        super.tearDown()
    }

    /// The URL of store file `name` in the test directory.
    func storeURL(_ name: String = "test.store") -> URL { URL(fileURLWithPath: directory.path + "/" + name) }

    /// A container for `types` (and the types they reach) on store file
    /// `name` in the test directory.
    func container(for types: [any PersistentModel.Type], name: String = "test.store") throws -> ModelContainer {
        try ModelContainer(for: Schema(types), configurations: [ModelConfiguration(url: storeURL(name))])
    }

    /// How many models of `type` the store holds, counted in a new context.
    func count<T: PersistentModel>(_ type: T.Type, in container: ModelContainer) throws -> Int {
        try ModelContext(container).fetchCount(FetchDescriptor<T>())
    }
}
