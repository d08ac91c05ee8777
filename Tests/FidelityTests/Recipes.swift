// A recipe app's models, written the way SwiftData apps write them: types
// taken from initial values, nested enums, statics, computed properties,
// extensions in the same file, `#if` around computed members.
import Foundation
import Strata

@Model
final class Recipe {
    var id = UUID()
    var name: String = ""
    var summary = ""
    var servings = 2
    var rating: Double = 0
    var created = Date()
    var tags: [String] = []
    var difficulty = Difficulty.easy
    var isFavorite = false
    // Relationship attributes before or after doc comments, in any order.
    /// The recipe's ingredients, deleted with it.
    @Relationship(deleteRule: .cascade, inverse: \Ingredient.recipe)
    var ingredients = [Ingredient]()

    enum Difficulty: String, Codable, CaseIterable {
        case easy, medium, hard
    }

    struct Nutrition: Codable, Hashable {
        var calories: Int
    }

    static let maximumServings = 12
    static var untitled: String { "Untitled" }

    var ingredientCount: Int { ingredients.count }

    #if os(Linux)
        var platformNote: String { "server" }
    #else
        var platformNote: String { "device" }
    #endif

    init(name: String, summary: String = "", servings: Int = 2, difficulty: Difficulty = .easy) {
        self.name = name
        self.summary = summary
        self.servings = servings
        self.difficulty = difficulty
    }

    func scaled(to servings: Int) -> Double { Double(servings) / Double(max(self.servings, 1)) }
}

extension Recipe {
    var displayName: String { name.isEmpty ? Self.untitled : name }

    static func matching(_ text: String) -> Predicate<Recipe> {
        #Predicate<Recipe> { recipe in recipe.name.contains(text) }
    }
}

@Model
final class Ingredient {
    var name: String
    var quantity: Double = 1.0
    var unit = "g"
    var recipe: Recipe?

    init(name: String, quantity: Double = 1, unit: String = "g") {
        self.name = name
        self.quantity = quantity
        self.unit = unit
    }
}
