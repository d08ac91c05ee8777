import Foundation
import Strata

/// A model for query tests: indexed, unique, optional, enum, Codable and
/// relationship attributes.
@Model
final class Gadget {
    #Index<Gadget>([\.score], [\.name], [\.category, \.score], [\.size])

    @Attribute(.unique) var uid: Int
    var score: Int
    var name: String
    var rating: Double
    var flag: Bool
    var note: String?
    var size: Int?
    var category: Status
    var address: Address?
    var maker: Maker?
    @Relationship(deleteRule: .cascade, inverse: \Part.gadget)
    var parts: [Part] = []

    /// Not stored: read on models only.
    var doubledScore: Int { score * 2 }

    init(uid: Int, score: Int, name: String, rating: Double, flag: Bool, category: Status) {
        self.uid = uid
        self.score = score
        self.name = name
        self.rating = rating
        self.flag = flag
        self.category = category
    }
}

@Model
final class Maker {
    #Index<Maker>([\.name])
    var name: String
    var country: String
    @Relationship(inverse: \Gadget.maker)
    var gadgets: [Gadget] = []

    init(name: String, country: String) {
        self.name = name
        self.country = country
    }
}

@Model
final class Part {
    var label: String
    var weight: Int
    var gadget: Gadget?

    init(label: String, weight: Int) {
        self.label = label
        self.weight = weight
    }
}

/// A model for floating-point sorts: the same value in an indexed and a
/// plain attribute, as Double and as Float.
@Model
final class Measure {
    #Index<Measure>([\.indexed], [\.indexedFloat])

    var uid: Int
    var indexed: Double
    var plain: Double
    var indexedFloat: Float
    var plainFloat: Float

    /// Not stored: a sort on it sorts models in memory.
    var constant: Int { 0 }

    init(uid: Int, value: Double) {
        self.uid = uid
        self.indexed = value
        self.plain = value
        self.indexedFloat = Float(value)
        self.plainFloat = Float(value)
    }
}
