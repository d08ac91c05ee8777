import Foundation
import StrataEngine
import XCTest

@testable import Strata

@Model final class Voyage {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Port.voyage) var ports: [Port] = []

    init(name: String) { self.name = name }
}

@Model final class Port {
    var name: String
    var voyage: Voyage?

    init(name: String) { self.name = name }
}

@Model final class Sailor {
    @Attribute(.unique) var name: String
    var age: Int

    init(name: String, age: Int) {
        self.name = name
        self.age = age
    }
}

/// Points at a sailor without an inverse: in a store of its own, a
/// relationship across stores.
@Model final class Berth {
    var number: Int
    var sailor: Sailor?

    init(number: Int) { self.number = number }
}

/// A deck's cabins cannot be without a deck (a non-optional to-one).
@Model final class Deck {
    var level: Int
    @Relationship(deleteRule: .cascade, inverse: \Cabin.deck) var cabins: [Cabin] = []

    init(level: Int) { self.level = level }
}

@Model final class Cabin {
    var number: Int
    var deck: Deck

    init(number: Int, deck: Deck) {
        self.number = number
        self.deck = deck
    }
}

/// Several configurations in one container, as SwiftData's documentation
/// shows them: each model type in the store of the configuration that
/// names it, routed by type, saved store by store.
final class SeveralStoresTests: StoreTestCase {
    let fullSchema = Schema([Voyage.self, Port.self, Sailor.self])

    func voyages(allowsSave: Bool = true) -> ModelConfiguration {
        ModelConfiguration("voyages", schema: Schema([Voyage.self]), url: storeURL("voyages.store"), allowsSave: allowsSave)
    }

    func sailors(allowsSave: Bool = true) -> ModelConfiguration {
        ModelConfiguration("sailors", schema: Schema([Sailor.self]), url: storeURL("sailors.store"), allowsSave: allowsSave)
    }

    func open(_ configurations: ModelConfiguration...) throws -> ModelContainer {
        track(try ModelContainer(for: fullSchema, configurations: configurations))
    }

    func testEachModelTypeLivesInItsConfigurationsStore() throws {
        do {
            let container = try open(voyages(), sailors())
            XCTAssertEqual(container.orderedConfigurations.map(\.name), ["voyages", "sailors"])
            let context = ModelContext(container)
            let voyage = Voyage(name: "North")
            context.insert(voyage)
            voyage.ports.append(Port(name: "Bergen"))
            voyage.ports.append(Port(name: "Tromsø"))
            let sailor = Sailor(name: "Ada", age: 36)
            context.insert(sailor)
            XCTAssertTrue(voyage.modelContext === context)
            XCTAssertTrue(sailor.modelContext === context)
            XCTAssertEqual(Set(context.insertedModelsArray.map { "\(type(of: $0))" }), ["Voyage", "Sailor"])
            XCTAssertTrue(context.hasChanges)
            try context.save()
            XCTAssertFalse(context.hasChanges)
            XCTAssertNotEqual(voyage.persistentModelID.storeIdentifier, sailor.persistentModelID.storeIdentifier)
            XCTAssertTrue(context.model(for: sailor.persistentModelID) === sailor)
            XCTAssertTrue(context.registeredModel(for: voyage.persistentModelID) as Voyage? === voyage)
            XCTAssertEqual(try context.fetchCount(FetchDescriptor<Port>()), 2)
        }
        // Each file holds its own types only.
        do {
            let alone = track(
                try ModelContainer(
                    for: Voyage.self, configurations: ModelConfiguration(url: storeURL("voyages.store"))))
            XCTAssertEqual(try ModelContext(alone).fetch(FetchDescriptor<Voyage>()).map(\.name), ["North"])
            XCTAssertEqual(try ModelContext(alone).fetchCount(FetchDescriptor<Port>()), 2)
            XCTAssertNil(alone.schema.entity(named: "Sailor"))
        }
        do {
            let alone = track(
                try ModelContainer(for: Sailor.self, configurations: ModelConfiguration(url: storeURL("sailors.store"))))
            XCTAssertEqual(try ModelContext(alone).fetch(FetchDescriptor<Sailor>()).map(\.name), ["Ada"])
            XCTAssertEqual(alone.schema.entities.map(\.name), ["Sailor"])
        }
        // Reopened together, with a predicate, a delete with its cascade,
        // and an identifier of one store asked of the other.
        let container = try open(voyages(), sailors())
        let context = ModelContext(container)
        let north = try XCTUnwrap(try context.fetch(FetchDescriptor<Voyage>(predicate: #Predicate { $0.name == "North" })).first)
        XCTAssertEqual(Set(north.ports.map(\.name)), ["Bergen", "Tromsø"])
        let ada = try XCTUnwrap(try context.fetch(FetchDescriptor<Sailor>(predicate: #Predicate { $0.age > 30 })).first)
        let wrongStore = PersistentIdentifier(
            storeIdentifier: north.persistentModelID.storeIdentifier, entityName: "Sailor",
            rowID: ada.persistentModelID.rowID)
        XCTAssertNil(context.registeredModel(for: wrongStore) as Sailor?)
        XCTAssertNil(try context.existingModel(for: wrongStore) as Sailor?)
        context.delete(north)
        ada.age = 37
        try context.save()
        let fresh = ModelContext(container)
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<Port>()), 0)
        XCTAssertEqual(try fresh.fetch(FetchDescriptor<Sailor>()).map(\.age), [37])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testAConfigurationWithoutASchemaHoldsTheRest() throws {
        let container = try open(sailors(), ModelConfiguration("rest", url: storeURL("rest.store")))
        let context = ModelContext(container)
        context.insert(Voyage(name: "West"))
        context.insert(Sailor(name: "Bo", age: 20))
        try context.save()
        XCTAssertEqual(container.parts[1].schema.entities.map(\.name), ["Port", "Voyage"])
        XCTAssertEqual(try ModelContext(container.parts[1]).fetchCount(FetchDescriptor<Voyage>()), 1)
        XCTAssertEqual(try ModelContext(container.parts[0]).fetchCount(FetchDescriptor<Sailor>()), 1)
    }

    func testAReadOnlyStoreBesideAWritableOne() throws {
        do {
            let context = ModelContext(try open(voyages(), sailors()))
            context.insert(Sailor(name: "Cy", age: 50))
            try context.save()
        }
        let container = try open(voyages(), sailors(allowsSave: false))
        let context = ModelContext(container)
        context.insert(Voyage(name: "East"))
        try context.save()
        XCTAssertEqual(try context.fetch(FetchDescriptor<Sailor>()).map(\.name), ["Cy"])

        // A save that would write the read-only store writes neither.
        context.insert(Voyage(name: "South"))
        let cy = try XCTUnwrap(try context.fetch(FetchDescriptor<Sailor>()).first)
        cy.age = 51
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .readOnlyStore, "\(error)")
        }
        XCTAssertTrue(context.hasChanges)
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Voyage>()), 1)
        context.rollback()
        XCTAssertEqual(cy.age, 50)
        XCTAssertFalse(context.hasChanges)
    }

    func testAFailureBeforeTheFirstCommitLeavesEveryStoreUnchanged() throws {
        let container = try open(voyages(), sailors())
        let setup = ModelContext(container)
        let voyage = Voyage(name: "Far")
        setup.insert(voyage)
        setup.insert(Sailor(name: "Di", age: 40))
        try setup.save()

        // Another context deletes the voyage; this one changes it and a
        // sailor: its save fails on the voyage, and writes no sailor.
        let context = ModelContext(container)
        let far = try XCTUnwrap(try context.fetch(FetchDescriptor<Voyage>()).first)
        let di = try XCTUnwrap(try context.fetch(FetchDescriptor<Sailor>()).first)
        setup.delete(voyage)
        try setup.save()
        far.name = "Farther"
        di.age = 41
        context.insert(Sailor(name: "Ed", age: 30))
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .modelDeleted, "\(error)")
        }
        let reader = ModelContext(container)
        XCTAssertEqual(try reader.fetch(FetchDescriptor<Sailor>()).map(\.age), [40])
        XCTAssertTrue(context.hasChanges)
        XCTAssertEqual(di.age, 41)
    }

    func testRelationshipsAcrossStoresAndBadConfigurationsAreRefused() throws {
        // Berth (in the configuration without a schema) points at Sailor.
        let schema = Schema([Berth.self, Sailor.self])
        XCTAssertThrowsError(
            try ModelContainer(for: schema, configurations: [sailors(), ModelConfiguration("rest", url: storeURL("r.store"))])
        ) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .loadIssueModelContainer, "\(error)")
            XCTAssertTrue("\(error)".contains("Berth.sailor"), "\(error)")
        }
        // Voyage's schema holds Port: naming Port again is naming it twice.
        XCTAssertThrowsError(
            try ModelContainer(
                for: fullSchema,
                configurations: [
                    voyages(), ModelConfiguration("ports", schema: Schema([Port.self]), url: storeURL("p.store")),
                    sailors(),
                ])
        ) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .configurationSchemaNotFoundInContainerSchema)
            XCTAssertTrue("\(error)".contains("relationships across stores"), "\(error)")
        }
        // Two configurations without a schema; a type in none; one file twice.
        for configurations in [
            [ModelConfiguration("a", url: storeURL("a.store")), ModelConfiguration("b", url: storeURL("b.store"))],
            [voyages(), ModelConfiguration("more", schema: Schema([Voyage.self]), url: storeURL("v2.store"))],
            [voyages(), ModelConfiguration("same", schema: Schema([Sailor.self]), url: storeURL("voyages.store"))],
        ] {
            XCTAssertThrowsError(try ModelContainer(for: fullSchema, configurations: configurations)) { error in
                XCTAssertNotNil(error as? SwiftDataError, "\(error)")
            }
        }
        XCTAssertThrowsError(try ModelContainer(for: fullSchema, configurations: [voyages(), voyages()]))
    }

    func testContextsOfTwoContainersOnTheSameStoresMerge() throws {
        let first = try open(voyages(), sailors())
        let second = try open(sailors(), voyages())
        let writer = ModelContext(first)
        let reader = ModelContext(second)
        let sailor = Sailor(name: "Flo", age: 25)
        writer.insert(sailor)
        writer.insert(Voyage(name: "Up"))
        try writer.save()
        let seen = try XCTUnwrap(try reader.fetch(FetchDescriptor<Sailor>()).first)
        XCTAssertEqual(try reader.fetchCount(FetchDescriptor<Voyage>()), 1)
        sailor.age = 26
        try writer.save()
        reader.processPendingChanges()
        XCTAssertEqual(seen.age, 26)
        // Saves from both, in opposite store orders, do not deadlock.
        let group = DispatchGroup()
        for container in [first, second] {
            DispatchQueue.global().async(group: group) {
                let context = ModelContext(container)
                for index in 0..<20 {
                    context.insert(Voyage(name: "v\(index)"))
                    context.insert(Sailor(name: "\(ObjectIdentifier(container).hashValue)-\(index)", age: index))
                    try? context.save()
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(try ModelContext(first).fetchCount(FetchDescriptor<Voyage>()), 41)
        XCTAssertEqual(try ModelContext(second).fetchCount(FetchDescriptor<Sailor>()), 41)
    }

    func testNotificationsHistoryUndoAndDeleteAllDataCoverEveryStore() throws {
        let container = try open(voyages(), sailors())
        let context = ModelContext(container)
        context.author = "app"
        let saved = Locked<[PersistentIdentifier]>([])
        let observer = NotificationCenter.default.addObserver(forName: ModelContext.didSave, object: context, queue: nil) {
            let inserted = $0.userInfo?[ModelContext.NotificationKey.insertedIdentifiers.rawValue] as? [PersistentIdentifier]
            saved.withLock { $0 += inserted ?? [] }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        context.insert(Voyage(name: "One"))
        context.insert(Sailor(name: "Gus", age: 60))
        try context.save()
        XCTAssertEqual(Set(saved.withLock { $0 }.map(\.entityName)), ["Voyage", "Sailor"])

        let history = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        XCTAssertEqual(history.count, 2)
        XCTAssertEqual(Set(history.map(\.storeIdentifier)).count, 2)
        XCTAssertEqual(Set(history.map(\.author)), ["app"])
        let sailorsStore = try XCTUnwrap(
            try context.fetch(FetchDescriptor<Sailor>()).first?.persistentModelID.storeIdentifier)
        let onlySailors = try context.fetchHistory(
            HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.storeIdentifier == sailorsStore }))
        XCTAssertEqual(onlySailors.count, 1)

        #if !canImport(Darwin)
            let undo = UndoManager()
            context.undoManager = undo
            let gus = try XCTUnwrap(try context.fetch(FetchDescriptor<Sailor>()).first)
            gus.age = 61
            context.insert(Voyage(name: "Two"))
            undo.undo()
            XCTAssertEqual(try context.fetchCount(FetchDescriptor<Voyage>()), 1)
            undo.undo()
            XCTAssertEqual(gus.age, 60)
            undo.redo()
            XCTAssertEqual(gus.age, 61)
            try context.save()
            XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<Sailor>()).map(\.age), [61])
        #endif

        try container.erase()
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Voyage>()), 0)
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Sailor>()), 0)
    }

    func testARequiredToOneLeftEmptyFailsTheSaveOfSeveralStores() throws {
        let container = track(
            try ModelContainer(
                for: Schema([Deck.self, Cabin.self, Sailor.self]),
                configurations: [
                    sailors(), ModelConfiguration("decks", schema: Schema([Deck.self]), url: storeURL("decks.store")),
                ]))
        let context = ModelContext(container)
        let deck = Deck(level: 1)
        context.insert(deck)
        let cabin = Cabin(number: 7, deck: deck)
        context.insert(cabin)
        try context.save()
        deck.cabins.removeAll()
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .modelValidationFailure, "\(error)")
        }
        context.rollback()
        XCTAssertEqual(deck.cabins.map(\.number), [7])
        XCTAssertNoThrow(try context.save())
    }

    func testOneWillSaveAndOneDidSavePerSaveAndObserversChangesAreSaved() throws {
        let container = try open(voyages(), sailors())
        let context = ModelContext(container)
        let sailor = Sailor(name: "Kai", age: 30)
        context.insert(sailor)
        try context.save()
        let counts = Locked((willSave: 0, didSave: 0))
        nonisolated(unsafe) let observed = sailor
        let willSave = NotificationCenter.default.addObserver(forName: ModelContext.willSave, object: context, queue: nil) {
            _ in
            counts.withLock { $0.willSave += 1 }
            observed.age += 1
        }
        let didSave = NotificationCenter.default.addObserver(forName: ModelContext.didSave, object: context, queue: nil) {
            _ in counts.withLock { $0.didSave += 1 }
        }
        defer {
            NotificationCenter.default.removeObserver(willSave)
            NotificationCenter.default.removeObserver(didSave)
        }
        // The save changes only the voyages' store; the observer changes
        // the sailors' too, and that change is saved with it.
        context.insert(Voyage(name: "Observed"))
        try context.save()
        XCTAssertEqual(counts.withLock { $0.willSave }, 1)
        XCTAssertEqual(counts.withLock { $0.didSave }, 1)
        XCTAssertFalse(context.hasChanges)
        XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<Sailor>()).map(\.age), [31])
    }

    func testHistoryTokensKnowTheirStore() throws {
        let container = try open(voyages(), sailors())
        let context = ModelContext(container)
        context.insert(Voyage(name: "A"))
        context.insert(Sailor(name: "Lu", age: 1))
        try context.save()
        let history = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        XCTAssertEqual(history.count, 2)
        XCTAssertEqual(Set(history.map(\.token.tokenValue)).count, 1, "each store's first save is its token 1")
        XCTAssertNotEqual(history[0].token, history[1].token)
        XCTAssertEqual(Set(history).count, 2)

        // A token selects its own store's history, for fetches and deletes.
        context.insert(Voyage(name: "B"))
        try context.save()
        let first = try XCTUnwrap(history.first { $0.changes.contains { $0.changedPersistentIdentifier.entityName == "Voyage" } })
        let firstToken = first.token
        let after = try context.fetchHistory(
            HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > firstToken }))
        XCTAssertEqual(after.count, 1)
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token <= firstToken }))
        let left = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        XCTAssertEqual(left.count, 2, "the sailors' transaction stays: \(left.map(\.token))")
    }

    func testReadOnlyStoresKeepHistoryAndDataAndTheirMarks() throws {
        do {
            let context = ModelContext(try open(voyages(), sailors()))
            context.insert(Voyage(name: "Both"))
            context.insert(Sailor(name: "Mo", age: 2))
            try context.save()
        }
        let container = try open(voyages(), sailors(allowsSave: false))
        let context = ModelContext(container)
        try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        XCTAssertEqual(try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).count, 1)
        try container.erase()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Voyage>()), 0)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Sailor>()), 1)
        XCTAssertEqual(try container.checkIntegrity(), [], "emptying one store keeps its mark")
        let readOnly = try open(voyages(allowsSave: false), sailors(allowsSave: false))
        XCTAssertThrowsError(try readOnly.erase()) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .readOnlyStore, "\(error)")
        }
    }

    /// The process stops between the two commits of one save: the store
    /// committed first has the save, the other does not, and
    /// `checkIntegrity()` says so.
    func testACrashBetweenTheCommitsIsReported() throws {
        let voyageFiles = MemoryFileSystem()
        let sailorFiles = MemoryFileSystem()
        let voyageURL = URL(fileURLWithPath: "/mem/voyages.store")
        let sailorURL = URL(fileURLWithPath: "/mem/sailors.store")
        func open(_ voyageFiles: MemoryFileSystem, _ sailorFiles: MemoryFileSystem) throws -> ModelContainer {
            try ModelContainer(
                for: fullSchema,
                configurations: [
                    ModelConfiguration(url: voyageURL, fileSystem: voyageFiles, schema: Schema([Voyage.self])),
                    ModelConfiguration(url: sailorURL, fileSystem: sailorFiles, schema: Schema([Sailor.self])),
                ])
        }
        var voyagesImage: MemoryFileSystem?
        var sailorsImage: MemoryFileSystem?
        do {
            let container = try open(voyageFiles, sailorFiles)
            let context = ModelContext(container)
            context.insert(Voyage(name: "Before"))
            context.insert(Sailor(name: "Hal", age: 1))
            try context.save()
            XCTAssertEqual(try container.checkIntegrity(), [])

            // The store that commits second cannot sync its log.
            let firstIsVoyages = container.parts[0].store.identifier < container.parts[1].store.identifier
            let second = firstIsVoyages ? sailorFiles : voyageFiles
            second.faults = { $0.kind == .sync ? EIO : nil }
            context.insert(Voyage(name: "After"))
            context.insert(Sailor(name: "Ivy", age: 2))
            XCTAssertThrowsError(try context.save())
            // The first store's part is saved; the second's is not.
            XCTAssertEqual(context.insertedModelsArray.count, 1)
            voyagesImage = voyageFiles.afterPowerLoss()
            sailorsImage = sailorFiles.afterPowerLoss()
        }
        let reopened = try open(try XCTUnwrap(voyagesImage), try XCTUnwrap(sailorsImage))
        let counts = (
            try ModelContext(reopened).fetchCount(FetchDescriptor<Voyage>()),
            try ModelContext(reopened).fetchCount(FetchDescriptor<Sailor>())
        )
        XCTAssertEqual(counts.0 + counts.1, 3, "one store has the second save, the other not")
        let problems = try reopened.checkIntegrity()
        XCTAssertEqual(problems.count, 1, "\(problems)")
        XCTAssertEqual(problems.first?.tree, SaveMark.tree)
        XCTAssertTrue(problems.first?.reason.contains("between the two commits") ?? false)

        // The next save over both stores brings their marks level again.
        let context = ModelContext(reopened)
        context.insert(Voyage(name: "Again"))
        context.insert(Sailor(name: "Jo", age: 3))
        try context.save()
        XCTAssertEqual(try reopened.checkIntegrity(), [])
    }
}
