import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

/// SwiftData API that a survey of its documentation found missing or
/// different, each used as SwiftData's documentation declares it.
nonisolated final class SurfaceTests: FidelityTestCase {
    func testConfigurationInitializersAndTheirProperties() throws {
        let forTypes = ModelConfiguration(for: Recipe.self, Ingredient.self, isStoredInMemoryOnly: true)
        XCTAssertTrue(forTypes.isStoredInMemoryOnly)
        XCTAssertEqual(forTypes.schema?.entities.map(\.name).sorted(), ["Ingredient", "Recipe"])
        let container = try ModelContainer(for: Recipe.self, configurations: forTypes)
        let context = ModelContext(container)
        context.insert(Recipe(name: "Soup"))
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 1)

        let inMemory = ModelConfiguration(isStoredInMemoryOnly: true)
        XCTAssertTrue(inMemory.isStoredInMemoryOnly)
        XCTAssertEqual(inMemory.name, "default")
        let grouped = ModelConfiguration(
            "shared", isStoredInMemoryOnly: true, groupContainer: .identifier("group.example"),
            cloudKitDatabase: .private("iCloud.example"))
        XCTAssertEqual(grouped.groupContainer, .identifier("group.example"))
        XCTAssertEqual(grouped.cloudKitDatabase, .private("iCloud.example"))
        let atURL = ModelConfiguration(url: URL(fileURLWithPath: directory.file("x.store")), cloudKitDatabase: .none)
        XCTAssertEqual(atURL.cloudKitDatabase, ModelConfiguration.CloudKitDatabase.none)
        XCTAssertEqual(atURL.groupContainer, .automatic)
    }

    func testTheContainerKeepsItsPlanAndItsConfigurationsAsASet() throws {
        let url = URL(fileURLWithPath: directory.file("inventory.store"))
        let planned = try ModelContainer(
            for: Schema(versionedSchema: InventoryV2.self), migrationPlan: InventoryPlan.self,
            configurations: ModelConfiguration(url: url))
        XCTAssertTrue(planned.migrationPlan == InventoryPlan.self)
        let configurations: Set<ModelConfiguration> = planned.configurations
        XCTAssertEqual(configurations.map(\.url), [url])
        XCTAssertNil(try container(Recipe.self).migrationPlan)

        let store = try XCTUnwrap(planned.storeIdentifier(forConfigurationNamed: "inventory"))
        XCTAssertEqual(planned.configurationName(forStoreIdentifier: store), "inventory")
        XCTAssertNil(planned.storeIdentifier(forConfigurationNamed: "other"))
        XCTAssertNil(planned.configurationName(forStoreIdentifier: "nowhere"))
    }

    func testConfigurationNamesAreCheckedWithSwiftDatasCodes() throws {
        let first = ModelConfiguration("same", schema: Schema([Recipe.self, Ingredient.self]), isStoredInMemoryOnly: true)
        let second = ModelConfiguration("same", schema: Schema([Note.self, Tag.self]), isStoredInMemoryOnly: true)
        XCTAssertThrowsError(try ModelContainer(for: Recipe.self, Note.self, configurations: first, second)) { error in
            XCTAssertEqual(error as? SwiftDataError, .duplicateConfiguration, "\(error)")
        }
        XCTAssertThrowsError(try ModelContainer(for: Recipe.self, configurations: ModelConfiguration("a/b"))) { error in
            XCTAssertEqual(error as? SwiftDataError, .configurationFileNameContainsInvalidCharacters, "\(error)")
        }
        let long = String(repeating: "n", count: 300)
        XCTAssertThrowsError(try ModelContainer(for: Recipe.self, configurations: ModelConfiguration(long))) { error in
            XCTAssertEqual(error as? SwiftDataError, .configurationFileNameTooLong, "\(error)")
        }
    }

    func testSwiftDataErrorsMatchAsPatterns() throws {
        let error: any Error = SwiftDataError(.unsupportedPredicate, "detail")
        switch error {
        case SwiftDataError.loadIssueModelContainer: XCTFail("matched another code")
        case SwiftDataError.unsupportedPredicate: break
        default: XCTFail("a SwiftDataError matches its code")
        }
        XCTAssertFalse(SwiftDataError.unsupportedPredicate ~= CocoaLikeError())
    }

    func testFetchIdentifiersInBatches() throws {
        let context = ModelContext(try container(Recipe.self))
        for name in ["c", "a", "b"] { context.insert(Recipe(name: name)) }
        try context.save()
        let ids = try context.fetchIdentifiers(FetchDescriptor<Recipe>(sortBy: [SortDescriptor(\.name)]), batchSize: 2)
        XCTAssertEqual(ids.count, 3)
        let names = ids.compactMap { (context.model(for: $0) as? Recipe)?.name }
        XCTAssertEqual(names, ["a", "b", "c"])
        context.insert(Recipe(name: "d"))
        XCTAssertThrowsError(try context.fetchIdentifiers(FetchDescriptor<Recipe>(), batchSize: 2)) { error in
            XCTAssertEqual(error as? SwiftDataError, .includePendingChangesWithBatchSize)
        }
    }

    func testIdentifiersAreIdentifiableAndContextsHaveAnEditingState() throws {
        let context = ModelContext(try container(Recipe.self))
        let soup = Recipe(name: "Soup")
        let bread = Recipe(name: "Bread")
        context.insert(soup)
        context.insert(bread)
        try context.save()
        let ids: [PersistentIdentifier.ID] = [soup.persistentModelID.id, bread.persistentModelID.id]
        XCTAssertNotEqual(ids[0], ids[1])
        XCTAssertEqual(
            soup.persistentModelID.id,
            try XCTUnwrap(
                context.fetchIdentifiers(
                    FetchDescriptor<Recipe>(predicate: #Predicate { $0.name == "Soup" }))
            ).first?.id)

        XCTAssertNil(context.editingState.author)
        context.editingState.author = "importer"
        XCTAssertEqual(context.author, "importer")
        XCTAssertEqual(context.editingState.author, "importer")
        XCTAssertEqual(context.editingState.id, context.editingState.id)
        XCTAssertNotEqual(context.editingState.id, ModelContext(context.container).editingState.id)
    }

    func testEntitiesDescribeTheirProperties() throws {
        let schema = Schema([Recipe.self, Ingredient.self])
        let recipe = try XCTUnwrap(schema.entity(named: "Recipe"))
        XCTAssertEqual(Set(recipe.attributesByName.keys), Set(recipe.attributes.map(\.name)))
        XCTAssertEqual(Set(recipe.relationshipsByName.keys), Set(recipe.relationships.map(\.name)))
        XCTAssertFalse(recipe.relationshipsByName.isEmpty)
        XCTAssertEqual(recipe.storedProperties.map(\.name), recipe.properties.map(\.name))
        XCTAssertNil(recipe.superentity)
        XCTAssertTrue(recipe.subentities.isEmpty)
        XCTAssertTrue(recipe.inheritedProperties.isEmpty)
        XCTAssertEqual(Set(schema.entities).count, 2, "entities are hashable")
    }

    func testASavedDeleteDetachesTheModelAsSwiftDataDoes() throws {
        let context = ModelContext(try container(Recipe.self))
        let soup = Recipe(name: "Soup")
        context.insert(soup)
        try context.save()
        context.delete(soup)
        XCTAssertTrue(soup.isDeleted, "deleted, not saved yet")
        XCTAssertTrue(soup.modelContext === context)
        XCTAssertEqual(context.deletedModelsArray.count, 1)
        try context.save()
        XCTAssertFalse(soup.isDeleted, "after the save SwiftData resets isDeleted")
        XCTAssertNil(soup.modelContext, "and the model has no context")
        XCTAssertTrue(context.deletedModelsArray.isEmpty)
        // Inserted again, it is a new model with a new row.
        let oldID = soup.persistentModelID
        context.insert(soup)
        try context.save()
        XCTAssertNotEqual(soup.persistentModelID, oldID)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 1)
    }

    func testAutosaveOnAModelActorsContext() async throws {
        let container = try container(Recipe.self)
        let worker = AutosavingKitchen(modelContainer: container)
        try await worker.add("Stew")
        // The autosave runs on the actor's queue after the actor's work.
        let reader = ModelContext(container)
        var count = 0
        for _ in 0..<400 {
            count = try reader.fetchCount(FetchDescriptor<Recipe>())
            if count == 1 { break }
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        XCTAssertEqual(count, 1, "the actor's autosave stored the recipe")
        let pending = await worker.hasChanges()
        XCTAssertFalse(pending)
    }

    func testAutosaveWhereNoQueueRuns() throws {
        let container = try container(Recipe.self)
        let done = expectation(description: "background context")
        let result = LockedBox<(Int, Bool)>((0, true))
        // A context made on a thread that runs no queue: it saves at its
        // next call into the store once its autosave is overdue.
        let thread = Thread {
            let context = ModelContext(container)
            context.autosaveEnabled = true
            context.insert(Recipe(name: "Bread"))
            Thread.sleep(forTimeInterval: 0.7)
            let seen = (try? context.fetchCount(FetchDescriptor<Recipe>())) ?? -1
            result.set((seen, context.hasChanges))
            done.fulfill()
        }
        thread.start()
        wait(for: [done], timeout: 20)
        let (seen, pending) = result.value
        XCTAssertEqual(seen, 1)
        XCTAssertFalse(pending, "the fetch saved first")
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Recipe>()), 1)
    }

    func testAutosaveStaysOffUnlessEnabled() throws {
        let container = try container(Recipe.self)
        let context = ModelContext(container)
        XCTAssertFalse(context.autosaveEnabled)
        context.insert(Recipe(name: "Unsaved"))
        Thread.sleep(forTimeInterval: 0.6)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 1, "the pending insert counts")
        XCTAssertTrue(context.hasChanges, "nothing saved it")
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Recipe>()), 0)
    }
}

/// An error of another domain, for `~=`.
nonisolated struct CocoaLikeError: Error {}

/// A value shared with a thread, behind a lock.
nonisolated final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.withLock { stored } }
    func set(_ value: Value) { lock.withLock { stored = value } }
}

@ModelActor
actor AutosavingKitchen {
    func add(_ name: String) throws {
        modelContext.autosaveEnabled = true
        modelContext.insert(Recipe(name: name))
    }

    func hasChanges() -> Bool { modelContext.hasChanges }
}

/// `propertiesToFetch` and `relationshipKeyPathsForPrefetching` are checked
/// against the model; a key path that names nothing to load is a typed error.
nonisolated final class FetchKeyPathTests: FidelityTestCase {
    func testKeyPathsThatNameNothingToLoadAreRefused() throws {
        let context = ModelContext(try container(Recipe.self, Ingredient.self))
        context.insert(Recipe(name: "Soup"))
        try context.save()
        var good = FetchDescriptor<Recipe>()
        good.propertiesToFetch = [\.name, \.servings]
        good.relationshipKeyPathsForPrefetching = [\.ingredients]
        XCTAssertEqual(try context.fetch(good).map(\.name), ["Soup"])
        XCTAssertEqual(try context.fetchCount(good), 1)

        var relationship = FetchDescriptor<Recipe>()
        relationship.propertiesToFetch = [\.ingredients]
        var computed = FetchDescriptor<Recipe>()
        computed.propertiesToFetch = [\.displayName]
        var attribute = FetchDescriptor<Recipe>()
        attribute.relationshipKeyPathsForPrefetching = [\.name]
        for (label, descriptor) in [("relationship", relationship), ("computed", computed), ("attribute", attribute)] {
            XCTAssertThrowsError(try context.fetch(descriptor), label) { error in
                XCTAssertEqual(error as? SwiftDataError, .unsupportedKeyPath, "\(label): \(error)")
            }
            XCTAssertThrowsError(try context.fetch(descriptor, batchSize: 10), label)
            XCTAssertThrowsError(try context.enumerate(descriptor) { _ in }, label)
        }
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 1, "the store is unchanged")
    }

    func testAPartialFetchReadsAndWritesLikeAWholeOne() throws {
        let container = try container(Recipe.self, Ingredient.self)
        let setup = ModelContext(container)
        let soup = Recipe(name: "Soup")
        soup.summary = "Hot"
        soup.servings = 4
        soup.tags = ["winter"]
        setup.insert(soup)
        soup.ingredients.append(Ingredient(name: "Leek"))
        let bread = Recipe(name: "Bread")
        bread.summary = "Loaf"
        setup.insert(bread)
        try setup.save()

        let context = ModelContext(container)
        context.undoManager = UndoManager()
        var descriptor = FetchDescriptor<Recipe>(sortBy: [SortDescriptor(\.name)])
        descriptor.propertiesToFetch = [\.name]
        descriptor.relationshipKeyPathsForPrefetching = [\.ingredients]
        let recipes = try context.fetch(descriptor)
        XCTAssertEqual(recipes.map(\.name), ["Bread", "Soup"])
        let fetched = recipes[1]
        XCTAssertEqual(fetched.summary, "Hot")
        XCTAssertEqual(fetched.servings, 4)
        XCTAssertEqual(fetched.tags, ["winter"])
        XCTAssertEqual(fetched.ingredients.map(\.name), ["Leek"])
        // A write to an attribute never read, undone: the old value comes back.
        recipes[0].summary = "Crusty"
        context.undoManager?.undo()
        XCTAssertEqual(recipes[0].summary, "Loaf")
        recipes[0].servings = 8
        try context.save()
        let stored = try ModelContext(container).fetch(FetchDescriptor<Recipe>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(stored.map(\.servings), [8, 4])
        XCTAssertEqual(stored.map(\.summary), ["Loaf", "Hot"])
        XCTAssertEqual(stored.map(\.name), ["Bread", "Soup"])
    }
}
