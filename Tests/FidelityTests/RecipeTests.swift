import FidelitySupport
import Foundation
import Strata
import XCTest

nonisolated final class RecipeTests: FidelityTestCase {
    func testInferredTypesRoundTripAndQuery() throws {
        let created: Date
        let id: UUID
        do {
            let context = ModelContext(try container(Recipe.self))
            let soup = Recipe(name: "Leek soup", summary: "warm", servings: 4, difficulty: .medium)
            soup.tags = ["winter", "vegetarian"]
            soup.rating = 4.5
            soup.isFavorite = true
            soup.ingredients.append(Ingredient(name: "leek", quantity: 2, unit: "pc"))
            soup.ingredients.append(Ingredient(name: "stock", quantity: 750, unit: "ml"))
            context.insert(soup)
            context.insert(Recipe(name: "Toast"))
            try context.save()
            created = soup.created
            id = soup.id
        }
        let context = ModelContext(try container(Recipe.self))
        let recipes = try context.fetch(FetchDescriptor<Recipe>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(recipes.map(\.name), ["Leek soup", "Toast"])
        let soup = recipes[0]
        XCTAssertEqual(soup.id, id)
        XCTAssertEqual(soup.summary, "warm")
        XCTAssertEqual(soup.servings, 4)
        XCTAssertEqual(soup.rating, 4.5)
        XCTAssertEqual(soup.created, created)
        XCTAssertEqual(soup.tags, ["winter", "vegetarian"])
        XCTAssertEqual(soup.difficulty, .medium)
        XCTAssertTrue(soup.isFavorite)
        XCTAssertEqual(Set(soup.ingredients.map(\.name)), ["leek", "stock"])
        XCTAssertEqual(soup.ingredientCount, 2)
        XCTAssertEqual(soup.displayName, "Leek soup")
        XCTAssertEqual(recipes[1].servings, 2, "the declared default")
        XCTAssertEqual(recipes[1].difficulty, .easy)

        // A predicate on each attribute.
        func names(_ predicate: Predicate<Recipe>) throws -> [String] {
            try context.fetch(FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\.name)])).map(\.name)
        }
        XCTAssertEqual(try names(#Predicate { $0.id == id }), ["Leek soup"])
        XCTAssertEqual(try names(#Predicate { $0.summary == "warm" }), ["Leek soup"])
        XCTAssertEqual(try names(#Predicate { $0.servings > 2 }), ["Leek soup"])
        XCTAssertEqual(try names(#Predicate { $0.rating >= 4 }), ["Leek soup"])
        XCTAssertEqual(try names(#Predicate { $0.created <= created }), ["Leek soup"])
        XCTAssertEqual(try names(#Predicate { $0.tags.contains("winter") }), ["Leek soup"])
        XCTAssertEqual(try names(#Predicate { $0.isFavorite }), ["Leek soup"])
        XCTAssertEqual(try names(#Predicate { !$0.isFavorite }), ["Toast"])
        XCTAssertEqual(try names(#Predicate { $0.ingredients.count == 0 }), ["Toast"])
        XCTAssertEqual(try names(Recipe.matching("soup")), ["Leek soup"])
        let medium = Recipe.Difficulty.medium
        XCTAssertEqual(try names(#Predicate { $0.difficulty == medium }), ["Leek soup"])

        // Cascade on delete.
        context.delete(soup)
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Ingredient>()), 0)
        XCTAssertEqual(try names(#Predicate { _ in true }), ["Toast"])
    }

    func testAnotherContextSeesAnInferredAttributeChange() throws {
        let container = try container(Recipe.self)
        let writer = ModelContext(container)
        let toast = Recipe(name: "Toast")
        writer.insert(toast)
        try writer.save()
        let reader = ModelContext(container)
        let seen = try XCTUnwrap(try reader.fetch(FetchDescriptor<Recipe>()).first)
        toast.servings = 6
        toast.tags.append("quick")
        try writer.save()
        _ = try reader.fetch(FetchDescriptor<Recipe>())
        XCTAssertEqual(seen.servings, 6)
        XCTAssertEqual(seen.tags, ["quick"])
    }
}
