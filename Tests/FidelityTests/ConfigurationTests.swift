import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

/// Configurations that cannot work get a typed error at container creation.
nonisolated final class ConfigurationTests: FidelityTestCase {
    private func url(_ name: String) -> URL { URL(fileURLWithPath: directory.file(name)) }

    private func assertRefused(
        _ configurations: [ModelConfiguration], _ code: SwiftDataError.Code, mentioning text: String,
        line: UInt = #line
    ) {
        XCTAssertThrowsError(
            try ModelContainer(for: Schema([Recipe.self]), configurations: configurations), line: line
        ) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, code, "\(error)", line: line)
            XCTAssertTrue("\(error)".contains(text), "\(error)", line: line)
        }
    }

    func testBadConfigurationsAreTypedErrors() {
        assertRefused(
            [ModelConfiguration("empty", schema: Schema([]), url: url("a.store"))],
            .configurationSchemaNotFoundInContainerSchema, mentioning: "names no model type")
        assertRefused(
            [ModelConfiguration("habits", schema: Schema([Habit.self]), url: url("a.store"))],
            .configurationSchemaNotFoundInContainerSchema, mentioning: "names Habit")
        assertRefused(
            [
                ModelConfiguration("one", schema: Schema([Recipe.self]), url: url("a.store")),
                ModelConfiguration("two", schema: Schema([Recipe.self]), url: url("b.store")),
            ],
            .configurationSchemaNotFoundInContainerSchema, mentioning: "named by two configurations")
        assertRefused(
            [
                ModelConfiguration("recipes", schema: Schema([Recipe.self]), url: url("a.store")),
                ModelConfiguration("rest", url: url("b.store")),
            ],
            .configurationSchemaNotFoundInContainerSchema, mentioning: "rest holds no model type")
    }

    func testAConfigurationNamingTheContainersTypesOpens() throws {
        let container = try ModelContainer(
            for: Schema([Recipe.self]),
            configurations: ModelConfiguration("recipes", schema: Schema([Recipe.self]), url: url("a.store")))
        let context = ModelContext(container)
        context.insert(Recipe(name: "Soup"))
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 1)
    }
}
