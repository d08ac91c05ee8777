import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// `delete(model:where:)` marks stored rows the context holds no model for
/// by row id, without building models; until the save they are pending
/// deletes like any other.
extension DeleteRuleTests {
    /// Three countries, each with two cities of two streets, saved and
    /// closed: a new context starts with nothing loaded.
    private func storeCountries(_ container: ModelContainer) throws {
        let context = ModelContext(container)
        for name in ["keep", "A", "B"] {
            let country = Country(name: name)
            for i in 0..<2 {
                let city = City(name: "\(name)-\(i)")
                city.streets = [Street(name: "\(name)-\(i)-x"), Street(name: "\(name)-\(i)-y")]
                country.cities.append(city)
            }
            context.insert(country)
        }
        try context.save()
    }

    private func registeredCount<T: PersistentModel>(_ type: T.Type, in context: ModelContext) throws -> Int {
        context.registry[try XCTUnwrap(context.container.schema.entity(forType: type)).ordinal].count
    }

    func testDeleteWhereBuildsNoModelsAndCascadesAtSave() throws {
        let container = try container()
        try storeCountries(container)
        let context = ModelContext(container)
        let log = EventLog()
        let observer = NotificationCenter.default.addObserver(forName: ModelContext.didSave, object: context, queue: nil) {
            let ids = $0.userInfo?[ModelContext.NotificationKey.deletedIdentifiers.rawValue] as? [PersistentIdentifier] ?? []
            log.append(ids.map(\.entityName).sorted().joined(separator: ","))
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        try context.delete(model: Country.self, where: #Predicate { $0.name != "keep" })
        XCTAssertEqual(try registeredCount(Country.self, in: context), 0, "no model was built for the matches")
        XCTAssertTrue(context.hasChanges)
        XCTAssertEqual(try context.fetch(FetchDescriptor<Country>()).map(\.name), ["keep"])
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Country>()), 1)
        XCTAssertEqual(try context.fetchIdentifiers(FetchDescriptor<Country>()).count, 1)
        XCTAssertEqual(try count(Country.self, in: container), 3, "nothing is written before the save")

        try context.save()
        XCTAssertFalse(context.hasChanges)
        XCTAssertEqual(try count(Country.self, in: container), 1)
        XCTAssertEqual(try count(City.self, in: container), 2, "the cascade reached the marked rows' cities")
        XCTAssertEqual(try count(Street.self, in: container), 4)
        let expected = Array(repeating: "City", count: 4) + ["Country", "Country"] + Array(repeating: "Street", count: 8)
        XCTAssertEqual(log.events, [expected.joined(separator: ",")], "didSave names every deleted row")
        XCTAssertEqual(try container.checkIntegrity(), [])
        XCTAssertEqual(try context.fetch(FetchDescriptor<Country>()).map(\.name), ["keep"])
    }

    /// Loaded, changed and inserted matches go through `delete(_:)`; a
    /// changed model matches by its current values, as a fetch would.
    func testDeleteWhereDeletesTheContextsOwnModelsAsModels() throws {
        let container = try container()
        try storeCountries(container)
        let context = ModelContext(container)
        let a = try XCTUnwrap(context.fetch(FetchDescriptor<Country>(predicate: #Predicate { $0.name == "A" })).first)
        let keep = try XCTUnwrap(context.fetch(FetchDescriptor<Country>(predicate: #Predicate { $0.name == "keep" })).first)
        keep.name = "gone"
        let fresh = Country(name: "gone")
        context.insert(fresh)
        try context.delete(model: Country.self, where: #Predicate { $0.name != "B" })
        XCTAssertTrue(a.isDeleted)
        XCTAssertTrue(keep.isDeleted, "matched by its unsaved name")
        XCTAssertNil(fresh.modelContext, "an unsaved insert is discarded")
        XCTAssertEqual(try context.fetch(FetchDescriptor<Country>()).map(\.name), ["B"])
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<Country>()).map(\.name), ["B"])
        XCTAssertEqual(try count(City.self, in: container), 2)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    /// A marked row loaded before the save — by a fetch without pending
    /// changes, by `model(for:)`, by `deletedModelsArray` — is the deleted
    /// model from then on; inserting it again takes back the delete.
    func testAMarkedRowLoadedBeforeTheSaveIsADeletedModel() throws {
        let container = try container()
        try storeCountries(container)
        let context = ModelContext(container)
        let ids = try context.fetchIdentifiers(FetchDescriptor<Country>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(try registeredCount(Country.self, in: context), 0)
        try context.delete(model: Country.self)

        var stored = FetchDescriptor<Country>(sortBy: [SortDescriptor(\.name)])
        stored.includePendingChanges = false
        let all = try context.fetch(stored)
        XCTAssertEqual(all.map(\.name), ["A", "B", "keep"])
        XCTAssertTrue(all.allSatisfy(\.isDeleted))
        XCTAssertEqual(context.deletedModelsArray.count, 3)

        context.insert(all[2])
        XCTAssertFalse(all[2].isDeleted)
        XCTAssertTrue(context.model(for: ids[0]).isDeleted)
        XCTAssertEqual(try context.fetch(FetchDescriptor<Country>()).map(\.name), ["keep"])
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<Country>()).map(\.name), ["keep"])
        XCTAssertEqual(try count(City.self, in: container), 2)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testDeletedModelsArrayListsMarkedRows() throws {
        let container = try container()
        try storeCountries(container)
        let context = ModelContext(container)
        try context.delete(model: Country.self, where: #Predicate { $0.name == "A" || $0.name == "B" })
        let listed = context.deletedModelsArray.compactMap { $0 as? Country }
        XCTAssertEqual(listed.map(\.name).sorted(), ["A", "B"])
        XCTAssertTrue(listed.allSatisfy(\.isDeleted))
        XCTAssertEqual(context.deletedModelsArray.count, 2, "each row is listed once")
        try context.save()
        XCTAssertEqual(try count(Country.self, in: container), 1)
        XCTAssertTrue(listed.allSatisfy { $0.modelContext == nil })
    }

    func testRollbackForgetsMarkedRows() throws {
        let container = try container()
        try storeCountries(container)
        let context = ModelContext(container)
        try context.delete(model: Country.self)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Country>()), 0)
        context.rollback()
        XCTAssertFalse(context.hasChanges)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Country>()), 3)
        try context.save()
        XCTAssertEqual(try count(Country.self, in: container), 3)
        XCTAssertEqual(try count(Street.self, in: container), 12)
    }

    /// A `.deny` refusal leaves the marks pending and the store unchanged;
    /// once the blocking rows go too, the same context's save succeeds.
    func testADeniedSaveKeepsTheMarks() throws {
        let container = try container()
        do {
            let context = ModelContext(container)
            for name in ["L1", "L2"] {
                let library = Library(name: name)
                library.books = [Book(title: "\(name)-b")]
                context.insert(library)
            }
            try context.save()
        }
        let context = ModelContext(container)
        try context.delete(model: Library.self)
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure)
        }
        XCTAssertTrue(context.hasChanges)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Library>()), 0, "still pending")
        XCTAssertEqual(try count(Library.self, in: container), 2)
        XCTAssertEqual(try count(Book.self, in: container), 2)
        try context.delete(model: Book.self)
        try context.save()
        XCTAssertEqual(try count(Library.self, in: container), 0)
        XCTAssertEqual(try count(Book.self, in: container), 0)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testDeleteWhereWithAnUnsupportedPredicateMarksNothing() throws {
        let container = try container()
        try storeCountries(container)
        let context = ModelContext(container)
        let big = Int.max
        XCTAssertThrowsError(try context.delete(model: Country.self, where: #Predicate { $0.name.count * big > 0 })) { error in
            XCTAssertEqual(error as? SwiftDataError, .unsupportedPredicate)
        }
        XCTAssertFalse(context.hasChanges)
    }
}
