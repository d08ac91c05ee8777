import FidelitySupport
import Foundation
import Strata
import XCTest

/// The predicate forms SwiftData apps write, each fetched and compared
/// with Foundation's own evaluation of the same predicate: a fetch returns
/// what Foundation returns, or throws `unsupportedPredicate`; it never
/// traps.
nonisolated final class PredicateFormTests: FidelityTestCase {
    func testCommonPredicateFormsAgreeWithFoundation() throws {
        let context = ModelContext(try container(Recipe.self))
        let specs: [(String, Int, Double, [String], Recipe.Difficulty, Bool)] = [
            ("Apple pie", 8, 4.5, ["sweet", "baked"], .medium, true),
            ("beef stew", 4, 3.0, ["winter"], .hard, false),
            ("Caesar salad", 2, 0, [], .easy, false),
            ("Dal", 6, 5, ["vegan", "winter"], .easy, true),
            ("éclair", 12, 4.9, ["sweet"], .hard, false),
        ]
        for (name, servings, rating, tags, difficulty, favorite) in specs {
            let recipe = Recipe(name: name, summary: name.lowercased(), servings: servings, difficulty: difficulty)
            recipe.rating = rating
            recipe.tags = tags
            recipe.isFavorite = favorite
            context.insert(recipe)
            if servings > 4 { recipe.ingredients = [Ingredient(name: "salt", quantity: Double(servings))] }
        }
        try context.save()
        let all = try context.fetch(FetchDescriptor<Recipe>())

        let now = Date()
        let names = ["Dal", "Apple pie"]
        let hard = Recipe.Difficulty.hard
        let optionalText: String? = "stew"
        let predicates: [(String, Predicate<Recipe>)] = [
            ("equal", #Predicate { $0.name == "Dal" }),
            ("not equal and", #Predicate { $0.name != "Dal" && $0.servings >= 4 }),
            ("or", #Predicate { $0.rating > 4.6 || $0.servings == 2 }),
            ("not", #Predicate { !($0.isFavorite) }),
            ("string less", #Predicate { $0.name < "C" }),
            ("contains", #Predicate { $0.summary.contains("st") }),
            ("starts with", #Predicate { $0.name.starts(with: "D") }),
            ("localized search", #Predicate { $0.name.localizedStandardContains("ECLAIR") }),
            ("in a list", #Predicate { names.contains($0.name) }),
            ("tags contain", #Predicate { $0.tags.contains("winter") }),
            ("tags empty", #Predicate { $0.tags.isEmpty }),
            ("tags count", #Predicate { $0.tags.count == 2 }),
            ("range", #Predicate { (3...8).contains($0.servings) }),
            ("arithmetic", #Predicate { $0.servings * 2 > 10 }),
            ("remainder", #Predicate { $0.servings % 4 == 0 }),
            ("enum", #Predicate { $0.difficulty == hard }),
            ("date", #Predicate { $0.created <= now }),
            ("to-many any", #Predicate { $0.ingredients.contains { $0.quantity > 7 } }),
            ("to-many all", #Predicate { $0.ingredients.allSatisfy { $0.name == "salt" } }),
            ("to-many count", #Predicate { $0.ingredients.count > 0 }),
            ("ternary", #Predicate { ($0.isFavorite ? $0.servings : 0) > 5 }),
            ("optional capture", #Predicate { $0.summary.contains(optionalText ?? "") }),
            ("filter count", #Predicate { $0.tags.filter { $0.starts(with: "s") }.count == 1 }),
            ("max of tags", #Predicate { $0.tags.max() == "winter" }),
        ]
        for (label, predicate) in predicates {
            let expected = Set(try all.filter { try predicate.evaluate($0) }.map(\.name))
            do {
                let fetched = try context.fetch(FetchDescriptor(predicate: predicate))
                XCTAssertEqual(Set(fetched.map(\.name)), expected, label)
                XCTAssertEqual(try context.fetchCount(FetchDescriptor(predicate: predicate)), expected.count, label)
            } catch let error as SwiftDataError where error.code == .unsupportedPredicate {
                XCTFail("\(label): refused, but Foundation evaluates it: \(error)")
            }
        }
    }

    func testAPredicateThatWouldTrapIsRefused() throws {
        let context = ModelContext(try container(Recipe.self))
        let recipe = Recipe(name: "Big", servings: Int.max)
        context.insert(recipe)
        try context.save()
        let overflow = #Predicate<Recipe> { $0.servings + 1 > 0 }
        XCTAssertThrowsError(try context.fetch(FetchDescriptor(predicate: overflow))) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .unsupportedPredicate)
        }
    }
}
