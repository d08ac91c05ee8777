import FidelitySupport
import Foundation
import Strata
import XCTest

nonisolated final class CodableModelTests: FidelityTestCase {
    func testCodableModelsAsToOneAndToManyTargets() throws {
        do {
            let context = ModelContext(try container(Team.self))
            let team = Team(name: "Otters", city: "Oslo")
            context.insert(team)
            team.players = [Player(name: "Ada", number: 7), Player(name: "Bo", number: 9)]
            try context.save()
        }
        let context = ModelContext(try container(Team.self))
        let team = try XCTUnwrap(try context.fetch(FetchDescriptor<Team>()).first)
        XCTAssertEqual(team.players.map(\.number).sorted(), [7, 9])
        let ada = try XCTUnwrap(
            try context.fetch(FetchDescriptor<Player>(predicate: #Predicate { $0.number == 7 })).first)
        XCTAssertEqual(ada.team?.city, "Oslo")

        // Their own Codable form still works, and does not include the store's.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = try encoder.encode(ada)
        XCTAssertEqual(String(decoding: json, as: UTF8.self), #"{"name":"Ada","number":7}"#)
        let copy = try JSONDecoder().decode(Player.self, from: json)
        XCTAssertEqual(copy.name, "Ada")
        XCTAssertNil(copy.team)
        context.insert(copy)
        copy.team = team
        try context.save()
        XCTAssertEqual(team.players.count, 3)

        // A predicate on each attribute, and a delete with its nullify.
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Team>(predicate: #Predicate { $0.name == "Otters" })), 1)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Team>(predicate: #Predicate { $0.city == "Oslo" })), 1)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Player>(predicate: #Predicate { $0.name == "Bo" })), 1)
        XCTAssertEqual(
            try context.fetchCount(FetchDescriptor<Player>(predicate: #Predicate { $0.team?.name == "Otters" })), 3)
        context.delete(team)
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Team>()), 0)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Player>(predicate: #Predicate { $0.team == nil })), 3)
    }
}
