import FidelitySupport
import Foundation
import Strata
import XCTest

/// A model actor that saves recipes, as a background importer would.
@ModelActor
actor RecipeImporter {
    func add(_ name: String) throws {
        modelContext.insert(Recipe(name: name))
        try modelContext.save()
    }
}

/// Live results as app code writes them, in each language setting: a
/// `for try await` loop on the main actor over the main context, fed by
/// another context's and a model actor's saves, and `@Query` properties.
nonisolated final class LiveResultsFidelityTests: FidelityTestCase {
    @MainActor func testALoopOnTheMainActorGetsEachSave() async throws {
        let container = try container(Recipe.self)
        let byName = FetchDescriptor<Recipe>(sortBy: [SortDescriptor(\.name)])
        let importer = RecipeImporter(modelContainer: container)
        var seen: [[String]] = []
        for try await recipes in container.mainContext.liveResults(byName) {
            seen.append(recipes.map(\.name))
            if seen.count == 1 {
                let other = ModelContext(container)
                other.insert(Recipe(name: "Soup"))
                try other.save()
            } else if seen.count == 2 {
                try await importer.add("Bread")
            } else {
                break
            }
        }
        XCTAssertEqual(seen, [[], ["Soup"], ["Bread", "Soup"]])
    }

    @MainActor func testQueryPropertiesFollowSaves() async throws {
        let container = try container(Recipe.self)
        let queries = CensusQueries()
        try QueryEnvironment.withModelContext(container.mainContext) {
            XCTAssertEqual(queries.all.count, 0)
            let other = ModelContext(container)
            let soup = Recipe(name: "Soup")
            soup.isFavorite = true
            other.insert(soup)
            other.insert(Recipe(name: "Toast"))
            try other.save()
            XCTAssertEqual(queries.all.count, 2)
            XCTAssertEqual(queries.favorites.map(\.name), ["Soup"])
            XCTAssertEqual(queries.described.count, 2)
            XCTAssertEqual(CensusQueries(named: "Toast").all.map(\.name), ["Toast"])
        }
    }
}
