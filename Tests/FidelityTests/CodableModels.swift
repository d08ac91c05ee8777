// Models that are also Codable with their own coding (for export), used as
// to-one and to-many relationship targets.
import Foundation
import Strata

@Model
final class Team: Codable {
    enum CodingKeys: String, CodingKey { case name, city }

    var name: String
    var city: String
    @Relationship(deleteRule: .nullify, inverse: \Player.team) var players: [Player] = []

    init(name: String, city: String) {
        self.name = name
        self.city = city
    }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        city = try container.decode(String.self, forKey: .city)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(city, forKey: .city)
    }
}

@Model
final class Player: Codable {
    enum CodingKeys: String, CodingKey { case name, number }

    var name: String
    var number: Int
    var team: Team?

    init(name: String, number: Int) {
        self.name = name
        self.number = number
    }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        number = try container.decode(Int.self, forKey: .number)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(number, forKey: .number)
    }
}
