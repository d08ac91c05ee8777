import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

nonisolated final class DeleteAllDataTests: FidelityTestCase {
    func testDeleteAllDataEmptiesTheStoreAndEveryContextMergesIt() throws {
        let container = try container(Recipe.self, Note.self)
        let context = ModelContext(container)
        let soup = Recipe(name: "Soup")
        context.insert(soup)
        soup.ingredients = [Ingredient(name: "leek")]
        let note = Note(title: "n")
        context.insert(note)
        note.tags = [Tag(name: "t")]
        try context.save()
        let oldID = soup.persistentModelID
        let other = ModelContext(container)
        let seen = try XCTUnwrap(try other.fetch(FetchDescriptor<Recipe>()).first)

        container.deleteAllData()  // does not throw, as in SwiftData

        XCTAssertEqual(try other.fetchCount(FetchDescriptor<Recipe>()), 0)
        XCTAssertEqual(try other.fetchCount(FetchDescriptor<Ingredient>()), 0)
        XCTAssertEqual(try other.fetchCount(FetchDescriptor<Tag>()), 0)
        XCTAssertTrue(seen.isDeleted, "a registered model leaves the context")
        XCTAssertNil(other.registeredModel(for: oldID) as Recipe?)
        XCTAssertTrue(other.model(for: oldID).isDeleted)
        _ = try context.fetch(FetchDescriptor<Note>())
        XCTAssertTrue(soup.isDeleted)

        // The store takes new models, with new row numbers.
        let bread = Recipe(name: "Bread")
        context.insert(bread)
        try context.save()
        XCTAssertNotEqual(bread.persistentModelID, oldID)
        XCTAssertEqual(try other.fetch(FetchDescriptor<Recipe>()).map(\.name), ["Bread"])
        XCTAssertEqual(try container.checkIntegrity(), [])
        let token = try XCTUnwrap(context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).last?.token)
        try container.erase()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 0)
        var descriptor = HistoryDescriptor<DefaultHistoryTransaction>()
        descriptor.predicate = #Predicate { $0.token > token }
        XCTAssertThrowsError(try context.fetchHistory(descriptor), "a token from before has expired") { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .historyTokenExpired)
        }
        // A save after it takes a token no earlier save took (the token
        // counter is cleared with the history and must survive it).
        context.insert(Recipe(name: "Stew"))
        try context.save()
        let next = try XCTUnwrap(context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).last?.token)
        XCTAssertGreaterThan(next.tokenValue, token.tokenValue)
    }

    func testAReadOnlyContainerCannotDeleteAllData() throws {
        let writable = try container(Recipe.self)
        let context = ModelContext(writable)
        context.insert(Recipe(name: "Kept"))
        try context.save()
        let readOnly = try ModelContainer(
            for: Recipe.self,
            configurations: ModelConfiguration(url: URL(fileURLWithPath: directory.file("app.store")), allowsSave: false))
        XCTAssertThrowsError(try readOnly.erase()) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .readOnlyStore)
        }
        // SwiftData's deleteAllData() does not throw: the store stays as it is.
        readOnly.deleteAllData()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 1)
    }
}
