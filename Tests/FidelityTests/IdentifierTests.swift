import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

/// Identifiers know their store; descriptors are Sendable; fetchLimit 0.
nonisolated final class IdentifierTests: FidelityTestCase {
    /// Swift 6 code keeps a descriptor in a Sendable type (compiles only if
    /// FetchDescriptor is Sendable).
    struct SavedSearch: Sendable {
        var descriptor: FetchDescriptor<Recipe>
        var id: PersistentIdentifier?
        var container: ModelContainer?
    }

    func testIdentifiersOfTwoStoresNeverMatch() throws {
        let one = ModelContext(try container(Recipe.self, name: "one.store"))
        let two = ModelContext(try container(Recipe.self, name: "two.store"))
        let a = Recipe(name: "A")
        let b = Recipe(name: "B")
        one.insert(a)
        two.insert(b)
        try one.save()
        try two.save()
        XCTAssertNotNil(a.persistentModelID.storeIdentifier)
        XCTAssertNotEqual(a.persistentModelID.storeIdentifier, b.persistentModelID.storeIdentifier)
        XCTAssertNotEqual(a.persistentModelID, b.persistentModelID, "same entity and row, other store")
        XCTAssertTrue(one.registeredModel(for: a.persistentModelID) as Recipe? === a)
        XCTAssertNil(two.registeredModel(for: a.persistentModelID) as Recipe?)
        XCTAssertTrue(two.model(for: a.persistentModelID).isDeleted, "another store's identifier names no model")
        let id = a.persistentModelID
        XCTAssertEqual(try two.fetch(FetchDescriptor<Recipe>(predicate: #Predicate { $0.persistentModelID == id })).count, 0)
        XCTAssertEqual(try one.fetch(FetchDescriptor<Recipe>(predicate: #Predicate { $0.persistentModelID == id })).count, 1)

        // The Codable form carries the store.
        let decoded = try JSONDecoder().decode(PersistentIdentifier.self, from: JSONEncoder().encode(id))
        XCTAssertEqual(decoded, id)
        XCTAssertEqual(decoded.storeIdentifier, id.storeIdentifier)
        XCTAssertTrue(one.model(for: decoded) === a)
    }

    func testTheStoreIdentifierIsKeptInTheStoreNotItsPath() throws {
        let id: PersistentIdentifier
        do {
            let context = ModelContext(try container(Recipe.self))
            let recipe = Recipe(name: "A")
            context.insert(recipe)
            try context.save()
            id = recipe.persistentModelID
        }
        let store = try XCTUnwrap(id.storeIdentifier)
        XCTAssertFalse(store.contains("app.store"), "a UUID kept in the store, not the path: \(store)")
        // Moved, the store keeps its identifiers.
        for suffix in ["", "-wal", "-shm"] {
            let from = directory.file("app.store" + suffix)
            if FileManager.default.fileExists(atPath: from) {
                try FileManager.default.moveItem(atPath: from, toPath: directory.file("moved.store" + suffix))
            }
        }
        let context = ModelContext(try container(Recipe.self, name: "moved.store"))
        XCTAssertEqual(try context.fetch(FetchDescriptor<Recipe>()).first?.persistentModelID, id)
        XCTAssertEqual(context.model(for: id).persistentModelID, id)
    }

    func testAnInsertDeletedOrRolledBackKeepsItsIdentifier() throws {
        let context = ModelContext(try container(Recipe.self))
        let deleted = Recipe(name: "A")
        let rolledBack = Recipe(name: "B")
        context.insert(deleted)
        context.insert(rolledBack)
        let ids = [deleted.persistentModelID, rolledBack.persistentModelID]
        context.delete(deleted)
        context.rollback()
        XCTAssertEqual([deleted.persistentModelID, rolledBack.persistentModelID], ids)
    }

    func testTheSameFileGivesTheSameIdentifiers() throws {
        let first = ModelContext(try container(Recipe.self))
        let recipe = Recipe(name: "A")
        first.insert(recipe)
        try first.save()
        let id = recipe.persistentModelID
        let search = SavedSearch(descriptor: FetchDescriptor<Recipe>(), id: id, container: try container(Recipe.self))
        let other = ModelContext(try XCTUnwrap(search.container))
        let found = try XCTUnwrap(try other.fetch(search.descriptor).first)
        XCTAssertEqual(found.persistentModelID, id)
        XCTAssertEqual(try other.fetchIdentifiers(search.descriptor), [id])
    }

    func testFetchLimitZeroMeansNoLimit() throws {
        let context = ModelContext(try container(Recipe.self))
        for name in ["A", "B", "C"] { context.insert(Recipe(name: name)) }
        try context.save()
        var descriptor = FetchDescriptor<Recipe>(sortBy: [SortDescriptor(\.name)])
        descriptor.fetchLimit = 0
        XCTAssertEqual(try context.fetch(descriptor).map(\.name), ["A", "B", "C"])
        XCTAssertEqual(try context.fetchCount(descriptor), 3)
        descriptor.fetchLimit = 2
        XCTAssertEqual(try context.fetch(descriptor).map(\.name), ["A", "B"])
    }
}
