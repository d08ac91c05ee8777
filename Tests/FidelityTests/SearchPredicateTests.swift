import FidelitySupport
import Foundation
import Strata
import XCTest

/// `localizedStandardContains`, the search SwiftData apps write, on Linux.
nonisolated final class SearchPredicateTests: FidelityTestCase {
    func testLocalizedStandardContainsIgnoresCaseAndDiacritics() throws {
        let context = ModelContext(try container(Recipe.self))
        let names = ["Crème brûlée", "CREME caramel", "Ice cream", "Café au lait", "Tea"]
        for name in names { context.insert(Recipe(name: name)) }
        try context.save()

        func search(_ text: String) throws -> [String] {
            let predicate = #Predicate<Recipe> { $0.name.localizedStandardContains(text) }
            let fetched = try context.fetch(FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\.name)]))
            // Foundation's evaluation of the same predicate agrees.
            let evaluated = try names.filter { try predicate.evaluate(Recipe(name: $0)) }.sorted()
            XCTAssertEqual(fetched.map(\.name), evaluated, "search \(text)")
            return fetched.map(\.name)
        }
        XCTAssertEqual(try search("creme"), ["CREME caramel", "Crème brûlée"])
        XCTAssertEqual(try search("BRULEE"), ["Crème brûlée"])
        XCTAssertEqual(try search("cafe"), ["Café au lait"])
        XCTAssertEqual(try search("cream"), ["Ice cream"])
        XCTAssertEqual(try search(""), [])
        XCTAssertEqual(try search("xyz"), [])
        XCTAssertTrue("Crème Brûlée".localizedStandardContains("creme"))

        // Combined with other conditions, and through a relationship.
        let soup = Recipe(name: "Leek soup")
        context.insert(soup)
        soup.ingredients = [Ingredient(name: "Crème fraîche")]
        try context.save()
        let withCream = try context.fetch(
            FetchDescriptor<Recipe>(
                predicate: #Predicate { recipe in
                    recipe.servings == 2 && recipe.ingredients.contains { $0.name.localizedStandardContains("creme") }
                }))
        XCTAssertEqual(withCream.map(\.name), ["Leek soup"])
    }
}
