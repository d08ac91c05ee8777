import Foundation
import Strata
import StrataTesting
import XCTest

/// A store file in a fresh directory, opened as a SwiftData app opens it,
/// and checked at tear-down (shared by the fidelity tests of both
/// language modes).
open class FidelityTestCase: XCTestCase {
    public var directory: TemporaryDirectory!
    private var opened: [(URL, Schema)] = []

    override open func setUp() {
        super.setUp()
        directory = TemporaryDirectory(prefix: "strata-fidelity")
        opened = []
    }

    override open func tearDownWithError() throws {
        for (url, schema) in opened {
            let container = try ModelContainer(for: schema, configurations: ModelConfiguration(url: url))
            XCTAssertEqual(try container.checkIntegrity(), [], "integrity of \(url.lastPathComponent)")
        }
        directory.remove()
        try super.tearDownWithError()
    }

    /// A new container on store `name` for `types`.
    public func container(_ types: any PersistentModel.Type..., name: String = "app.store") throws -> ModelContainer {
        let url = URL(fileURLWithPath: directory.file(name))
        let schema = Schema(types)
        let container = try ModelContainer(for: schema, configurations: ModelConfiguration(url: url))
        if !opened.contains(where: { $0.0 == url }) { opened.append((url, schema)) }
        return container
    }
}
