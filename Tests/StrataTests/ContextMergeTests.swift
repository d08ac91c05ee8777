import Foundation
import StrataEngine
import StrataTesting
import XCTest

@testable import Strata

@Model
final class Tally {
    #Unique<Tally>([\.name])
    var name: String
    var a: Int
    var b: Int
    var c: Int

    init(name: String, a: Int = 0, b: Int = 0, c: Int = 0) {
        self.name = name
        self.a = a
        self.b = b
        self.c = c
    }
}

@ModelActor
actor TripEditor {
    func rename(_ id: PersistentIdentifier, destination: String) throws {
        guard let trip: Trip = try modelContext.existingModel(for: id) else { return }
        trip.destination = destination
        try modelContext.save()
    }

    func delete(_ id: PersistentIdentifier) throws {
        guard let trip: Trip = try modelContext.existingModel(for: id) else { return }
        modelContext.delete(trip)
        try modelContext.save()
    }

    func addItem(to id: PersistentIdentifier, title: String) throws {
        guard let trip: Trip = try modelContext.existingModel(for: id) else { return }
        let item = BucketListItem(title: title, details: "", hasReservation: false, isInPlan: true)
        modelContext.insert(item)
        item.trip = trip
        try modelContext.save()
    }
}

/// Contexts of one container merge each other's saves (issue 23): stale
/// reads, lost updates and resurrected rows are what they used to give.
final class ContextMergeTests: StoreTestCase {
    private func tripContainer() throws -> ModelContainer {
        try container(for: [Trip.self, BucketListItem.self, LivingAccommodation.self])
    }

    private func storedTrip(_ container: ModelContainer, named name: String) throws -> Trip? {
        try ModelContext(container).fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == name })).first
    }

    func testAnUnchangedModelTakesAnotherContextsSavedValues() throws {
        let container = try tripContainer()
        let main = ModelContext(container)
        main.insert(Trip(name: "Alps", destination: "Zermatt"))
        try main.save()
        let trip = try XCTUnwrap(main.fetch(FetchDescriptor<Trip>()).first)
        XCTAssertEqual(trip.destination, "Zermatt")

        let fired = LockedFlag()
        withObservationTracking {
            _ = trip.destination
        } onChange: {
            fired.set()
        }

        let background = ModelContext(container)
        let other = try XCTUnwrap(background.fetch(FetchDescriptor<Trip>()).first)
        other.destination = "Saas-Fee"
        try background.save()

        // A predicate fetch on the new value finds the same instance, with it.
        let found = try main.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == "Saas-Fee" }))
        XCTAssertEqual(found.count, 1)
        XCTAssertTrue(found.first === trip)
        XCTAssertEqual(trip.destination, "Saas-Fee")
        XCTAssertTrue(fired.value, "observers of the merged attribute are told")
        XCTAssertFalse(trip.hasChanges)
        XCTAssertFalse(main.hasChanges)
        // The old value no longer matches.
        XCTAssertEqual(try main.fetchCount(FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == "Zermatt" })), 0)
    }

    func testProcessPendingChangesMergesWithoutAFetch() throws {
        let container = try tripContainer()
        let main = ModelContext(container)
        main.insert(Trip(name: "Alps", destination: "Zermatt"))
        try main.save()
        let trip = try XCTUnwrap(main.fetch(FetchDescriptor<Trip>()).first)
        let background = ModelContext(container)
        try XCTUnwrap(background.fetch(FetchDescriptor<Trip>()).first).destination = "Davos"
        try background.save()
        XCTAssertEqual(trip.destination, "Zermatt", "merged at the context's next entry point, not from another thread")
        main.processPendingChanges()
        XCTAssertEqual(trip.destination, "Davos")
    }

    func testContextsThatChangeDifferentAttributesBothKeepTheirChange() throws {
        let container = try tripContainer()
        let setup = ModelContext(container)
        setup.insert(Trip(name: "Alps", destination: "Zermatt"))
        try setup.save()

        let one = ModelContext(container)
        let two = ModelContext(container)
        let first = try XCTUnwrap(one.fetch(FetchDescriptor<Trip>()).first)
        let second = try XCTUnwrap(two.fetch(FetchDescriptor<Trip>()).first)
        first.name = "Alps 2027"
        second.destination = "Grindelwald"
        try two.save()
        // `one` has not merged yet: its save must still not write the old
        // destination back.
        try one.save()
        XCTAssertEqual(first.destination, "Grindelwald", "the save merged the other save first")

        let stored = try XCTUnwrap(ModelContext(container).fetch(FetchDescriptor<Trip>()).first)
        XCTAssertEqual(stored.name, "Alps 2027")
        XCTAssertEqual(stored.destination, "Grindelwald")
        two.processPendingChanges()
        XCTAssertEqual(second.name, "Alps 2027")

        // The same attribute: the later save wins.
        first.destination = "Wengen"
        second.destination = "Mürren"
        try first.modelContext?.save()
        try second.modelContext?.save()
        XCTAssertEqual(try storedTrip(container, named: "Alps 2027")?.destination, "Mürren")
        one.processPendingChanges()
        XCTAssertEqual(first.destination, "Mürren")
    }

    func testAChangedModelKeepsItsChangedAttributesAndTakesTheOthers() throws {
        let container = try container(for: [Tally.self])
        let setup = ModelContext(container)
        setup.insert(Tally(name: "t", a: 1, b: 1, c: 1))
        try setup.save()
        let one = ModelContext(container)
        let two = ModelContext(container)
        let mine = try XCTUnwrap(one.fetch(FetchDescriptor<Tally>()).first)
        let theirs = try XCTUnwrap(two.fetch(FetchDescriptor<Tally>()).first)
        mine.a = 10
        theirs.a = 20
        theirs.b = 30
        try two.save()
        one.processPendingChanges()
        XCTAssertEqual(mine.a, 10, "an unsaved change is kept")
        XCTAssertEqual(mine.b, 30, "the other saved attribute is merged")
        XCTAssertTrue(mine.hasChanges)
        try one.save()
        let stored = try XCTUnwrap(ModelContext(container).fetch(FetchDescriptor<Tally>()).first)
        XCTAssertEqual([stored.a, stored.b, stored.c], [10, 30, 1])
    }

    /// A save that changes no field of a unique constraint leaves its
    /// entry as stored, also when another context's save changed the
    /// constrained field meanwhile; a save that changes it moves the entry.
    func testUniqueEntriesFollowTheStoredValueWhenAnotherContextRenamed() throws {
        let container = try container(for: [Tally.self])
        let setup = ModelContext(container)
        setup.insert(Tally(name: "t", a: 1))
        try setup.save()
        let one = ModelContext(container)
        let two = ModelContext(container)
        let mine = try XCTUnwrap(one.fetch(FetchDescriptor<Tally>()).first)
        let theirs = try XCTUnwrap(two.fetch(FetchDescriptor<Tally>()).first)
        mine.a = 10
        theirs.name = "renamed"
        try two.save()
        try one.save()
        let check = ModelContext(container)
        let byNew = try check.fetch(FetchDescriptor<Tally>(predicate: #Predicate { $0.name == "renamed" }))
        let byOld = try check.fetch(FetchDescriptor<Tally>(predicate: #Predicate { $0.name == "t" }))
        XCTAssertEqual(byNew.map(\.a), [10])
        XCTAssertEqual(byOld.count, 0)
        XCTAssertEqual(try container.checkIntegrity(), [])
        // The name goes back: a new model of the old name is an insert,
        // not an upsert into the renamed row.
        check.insert(Tally(name: "t", a: 2))
        try check.save()
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Tally>()), 2)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testAModelDeletedByAnotherSaveIsNeverRecreated() throws {
        let container = try tripContainer()
        let setup = ModelContext(container)
        setup.insert(Trip(name: "Alps", destination: "Zermatt"))
        setup.insert(Trip(name: "Coast", destination: "Nice"))
        try setup.save()

        let main = ModelContext(container)
        let trips = try main.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
        let alps = trips[0]
        let id = alps.persistentModelID
        let background = ModelContext(container)
        background.delete(try XCTUnwrap(background.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)])).first))
        try background.save()

        main.processPendingChanges()
        XCTAssertTrue(alps.isDeleted)
        XCTAssertNil(main.registeredModel(for: id) as Trip?)
        XCTAssertEqual(try main.fetch(FetchDescriptor<Trip>()).map(\.name), ["Coast"])

        // A change to it, with another pending change: the save refuses and
        // writes nothing.
        alps.destination = "Verbier"
        main.insert(Trip(name: "Lakes", destination: "Como"))
        XCTAssertThrowsError(try main.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelDeleted)
            XCTAssertTrue("\(error)".contains("Trip/p"), "names the model: \(error)")
        }
        XCTAssertEqual(try count(Trip.self, in: container), 1)
        XCTAssertTrue(main.hasChanges, "the context keeps its changes")
        main.delete(alps)
        try main.save()
        XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.name).sorted(), ["Coast", "Lakes"])
    }

    func testAChangeMadeBeforeTheOtherDeleteIsRefusedToo() throws {
        let container = try tripContainer()
        let setup = ModelContext(container)
        setup.insert(Trip(name: "Alps", destination: "Zermatt"))
        try setup.save()
        let main = ModelContext(container)
        let trip = try XCTUnwrap(main.fetch(FetchDescriptor<Trip>()).first)
        trip.destination = "Verbier"
        let background = ModelContext(container)
        background.delete(try XCTUnwrap(background.fetch(FetchDescriptor<Trip>()).first))
        try background.save()
        XCTAssertThrowsError(try main.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelDeleted)
        }
        XCTAssertEqual(try count(Trip.self, in: container), 0)
        XCTAssertTrue(trip.isDeleted)
        main.rollback()
        XCTAssertFalse(main.hasChanges)
        try main.save()
        XCTAssertEqual(try count(Trip.self, in: container), 0)
    }

    func testAModelActorsSavesReachTheOtherContext() async throws {
        let container = try tripContainer()
        let main = ModelContext(container)
        let trip = Trip(name: "Alps", destination: "Zermatt")
        main.insert(trip)
        try main.save()
        let id = trip.persistentModelID
        XCTAssertTrue(trip.bucketList.isEmpty)

        let editor = TripEditor(modelContainer: container)
        try await editor.rename(id, destination: "Arosa")
        try await editor.addItem(to: id, title: "Hike")
        XCTAssertEqual(try main.fetch(FetchDescriptor<Trip>()).first?.destination, "Arosa")
        XCTAssertEqual(trip.destination, "Arosa")
        XCTAssertEqual(trip.bucketList.map(\.title), ["Hike"], "a to-many loaded before is read again")

        try await editor.delete(id)
        main.processPendingChanges()
        XCTAssertTrue(trip.isDeleted)
        XCTAssertEqual(try main.fetchCount(FetchDescriptor<BucketListItem>()), 0, "the cascade reached the items")
    }

    func testRelationshipsMergeOnBothSides() throws {
        let container = try tripContainer()
        let setup = ModelContext(container)
        let trip = Trip(name: "Alps", destination: "Zermatt")
        setup.insert(trip)
        let hike = BucketListItem(title: "Hike", details: "", hasReservation: false, isInPlan: true)
        setup.insert(hike)
        hike.trip = trip
        try setup.save()

        let main = ModelContext(container)
        let mainTrip = try XCTUnwrap(main.fetch(FetchDescriptor<Trip>()).first)
        XCTAssertEqual(mainTrip.bucketList.map(\.title), ["Hike"])
        let mainHike = mainTrip.bucketList[0]

        let background = ModelContext(container)
        let otherTrip = try XCTUnwrap(background.fetch(FetchDescriptor<Trip>()).first)
        let ski = BucketListItem(title: "Ski", details: "", hasReservation: false, isInPlan: true)
        background.insert(ski)
        ski.trip = otherTrip
        try background.save()
        main.processPendingChanges()
        XCTAssertEqual(mainTrip.bucketList.map(\.title).sorted(), ["Hike", "Ski"])

        // Moving an item off the trip in the other context.
        let otherHike = try XCTUnwrap(otherTrip.bucketList.first { $0.title == "Hike" })
        otherHike.trip = nil
        try background.save()
        main.processPendingChanges()
        XCTAssertNil(mainHike.trip)
        XCTAssertEqual(mainTrip.bucketList.map(\.title), ["Ski"])

        // A delete with nullify in the other context empties this side.
        background.delete(otherTrip)
        try background.save()
        main.processPendingChanges()
        XCTAssertTrue(mainTrip.isDeleted)
        XCTAssertEqual(try main.fetchCount(FetchDescriptor<BucketListItem>()), 1, "the cascade deleted Ski, Hike stays")
        XCTAssertNil(mainHike.trip)
    }

    func testAnUpsertRefreshesTheRowsModelElsewhere() throws {
        let container = try container(for: [Tally.self])
        let setup = ModelContext(container)
        setup.insert(Tally(name: "ann", a: 1))
        try setup.save()
        let main = ModelContext(container)
        let ann = try XCTUnwrap(main.fetch(FetchDescriptor<Tally>()).first)
        let background = ModelContext(container)
        background.insert(Tally(name: "ann", a: 5, b: 6))
        try background.save()
        XCTAssertEqual(try count(Tally.self, in: container), 1)
        main.processPendingChanges()
        XCTAssertEqual([ann.a, ann.b], [5, 6])
    }

    /// Several contexts interleave changes, deletes, inserts, saves and
    /// merges against a reference of what each should see.
    func testRandomInterleavingsAgreeWithAReference() throws {
        for seed in 1...12 {
            try runInterleaving(seed: UInt64(seed))
        }
    }

    private struct Reference {
        /// The store: name → [a, b, c].
        var stored: [String: [Int]] = [:]
        /// Per context: unsaved field changes by name, pending deletes and inserts.
        var changes: [[String: [Int: Int]]]
        var deletes: [Set<String>]
        var inserts: [[String: [Int]]]

        init(contexts: Int) {
            changes = Array(repeating: [:], count: contexts)
            deletes = Array(repeating: [], count: contexts)
            inserts = Array(repeating: [:], count: contexts)
        }

        mutating func clear(_ c: Int) {
            changes[c] = [:]
            deletes[c] = []
            inserts[c] = [:]
        }

        /// What context `c` should see for each name.
        func view(_ c: Int) -> [String: [Int]] {
            var result: [String: [Int]] = [:]
            for (name, values) in stored where !deletes[c].contains(name) {
                var seen = values
                for (field, value) in changes[c][name] ?? [:] { seen[field] = value }
                result[name] = seen
            }
            for (name, values) in inserts[c] { result[name] = values }
            return result
        }
    }

    private func runInterleaving(seed: UInt64) throws {
        let container = try container(for: [Tally.self], name: "random-\(seed).store")
        var random = SeededRandom(seed: seed)
        let contextCount = 3
        let contexts = (0..<contextCount).map { _ in ModelContext(container) }
        var reference = Reference(contexts: contextCount)
        var nextName = 0
        let setup = ModelContext(container)
        for _ in 0..<6 {
            let name = "t\(nextName)"
            nextName += 1
            setup.insert(Tally(name: name))
            reference.stored[name] = [0, 0, 0]
        }
        try setup.save()

        func model(_ c: Int, _ name: String) throws -> Tally? {
            try contexts[c].fetch(FetchDescriptor<Tally>(predicate: #Predicate { $0.name == name })).first
        }

        for step in 0..<300 {
            let c = Int.random(in: 0..<contextCount, using: &random)
            let context = contexts[c]
            let label = "seed \(seed) step \(step) context \(c)"
            if ProcessInfo.processInfo.environment["STRATA_TRACE_MERGE"] != nil { print(label, reference) }
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<5:
                let names = Array(reference.view(c).keys).sorted()
                guard let name = names.randomElement(using: &random), let tally = try model(c, name) else { continue }
                let field = Int.random(in: 0..<3, using: &random)
                let value = Int.random(in: 1...1_000, using: &random)
                switch field {
                case 0: tally.a = value
                case 1: tally.b = value
                default: tally.c = value
                }
                if reference.inserts[c][name] != nil {
                    reference.inserts[c][name]?[field] = value
                } else {
                    reference.changes[c][name, default: [:]][field] = value
                }
            case 5:
                let names = Array(reference.view(c).keys).sorted()
                guard let name = names.randomElement(using: &random), let tally = try model(c, name) else { continue }
                context.delete(tally)
                if reference.inserts[c].removeValue(forKey: name) == nil {
                    reference.deletes[c].insert(name)
                    reference.changes[c][name] = nil
                }
            case 6:
                let name = "t\(nextName)"
                nextName += 1
                let value = Int.random(in: 1...1_000, using: &random)
                context.insert(Tally(name: name, a: value))
                reference.inserts[c][name] = [value, 0, 0]
            case 7, 8:
                let doomed = Set(reference.changes[c].keys).subtracting(reference.stored.keys)
                if doomed.isEmpty {
                    try context.save()
                    for name in reference.deletes[c] { reference.stored[name] = nil }
                    for (name, fields) in reference.changes[c] {
                        for (field, value) in fields { reference.stored[name]?[field] = value }
                    }
                    for (name, values) in reference.inserts[c] { reference.stored[name] = values }
                } else {
                    XCTAssertThrowsError(try context.save(), label) { error in
                        XCTAssertEqual(error as? SwiftDataError, .modelDeleted, label)
                    }
                    context.rollback()
                }
                reference.clear(c)
            default:
                context.processPendingChanges()
            }

            // The store holds the reference's rows.
            let stored = try ModelContext(container).fetch(FetchDescriptor<Tally>())
            XCTAssertEqual(
                Dictionary(uniqueKeysWithValues: stored.map { ($0.name, [$0.a, $0.b, $0.c]) }), reference.stored, label)
            // Each context sees the store with its own pending changes.
            for other in 0..<contextCount {
                let seen = try contexts[other].fetch(FetchDescriptor<Tally>())
                XCTAssertEqual(
                    Dictionary(uniqueKeysWithValues: seen.map { ($0.name, [$0.a, $0.b, $0.c]) }),
                    reference.view(other), "\(label), view of context \(other)")
            }
        }
        for context in contexts { context.rollback() }
    }
}

extension ContextMergeTests {
    /// A model changed and then deleted comes back from `rollback()` with
    /// its stored values, not the discarded change (it kept them before).
    func testRollbackRestoresAModelChangedThenDeleted() throws {
        let container = try container(for: [Tally.self])
        let context = ModelContext(container)
        context.insert(Tally(name: "t", a: 1))
        try context.save()
        let tally = try XCTUnwrap(context.fetch(FetchDescriptor<Tally>()).first)
        tally.a = 2
        context.delete(tally)
        context.rollback()
        XCTAssertFalse(tally.isDeleted)
        XCTAssertEqual(tally.a, 1)
        XCTAssertFalse(context.hasChanges)
    }
}

extension ContextMergeTests {
    /// `model(for:)` of an identifier that names no stored model returns a
    /// `MissingModel` (it trapped): a deleted row, an unknown entity, a
    /// temporary identifier, a damaged record.
    func testModelForAnIdentifierWithoutAModelDoesNotTrap() throws {
        let container = try tripContainer()
        let context = ModelContext(container)
        let trip = Trip(name: "Alps", destination: "Zermatt")
        context.insert(trip)
        let temporary = Trip(name: "Unsaved", destination: "Nowhere").persistentModelID
        try context.save()
        let id = trip.persistentModelID

        let other = ModelContext(container)
        XCTAssertTrue(other.model(for: id) is Trip)
        context.delete(trip)
        try context.save()
        for missing in [id, temporary, PersistentIdentifier(entityName: "Nope", rowID: 1)] {
            let model = other.model(for: missing)
            XCTAssertNil(model as? Trip, "\(missing)")
            XCTAssertTrue(model.isDeleted)
            XCTAssertEqual((model as? MissingModel)?.identifier, missing)
        }

        // A record that does not decode: existingModel says why.
        let setup = ModelContext(container)
        let damaged = Trip(name: "Coast", destination: "Nice")
        setup.insert(damaged)
        try setup.save()
        let original = try replaceRecord(of: damaged.persistentModelID, in: container, with: [1, 0x08, 0xFF])
        let fresh = ModelContext(container)
        XCTAssertTrue(fresh.model(for: damaged.persistentModelID) is MissingModel)
        XCTAssertThrowsError(try fresh.existingModel(for: damaged.persistentModelID) as Trip?) { error in
            XCTAssertEqual(error as? SwiftDataError, .corruptRecord)
        }
        // The record back as it was, for the tear-down's integrity check.
        try replaceRecord(of: damaged.persistentModelID, in: container, with: original)
    }
}

extension ContextMergeTests {
    /// A context that holds no model is not sent saves; once it fetches,
    /// it is.
    func testOnlyContextsThatHoldModelsReceiveSaves() throws {
        let container = try container(for: [Tally.self])
        let writer = ModelContext(container)
        writer.insert(Tally(name: "t"))
        try writer.save()
        let idle = ModelContext(container)
        let tally = try XCTUnwrap(writer.fetch(FetchDescriptor<Tally>()).first)
        tally.a = 1
        try writer.save()
        XCTAssertTrue(idle.inbox.isEmpty)
        let seen = try XCTUnwrap(idle.fetch(FetchDescriptor<Tally>()).first)
        tally.a = 2
        try writer.save()
        XCTAssertFalse(idle.inbox.isEmpty)
        idle.processPendingChanges()
        XCTAssertEqual(seen.a, 2)
    }

    /// Three threads, each with its own context, each changing its own
    /// attribute of the same rows and saving while the others do: no
    /// save undoes another's attribute, and every context ends up seeing
    /// the store.
    func testConcurrentSavesOfDifferentAttributesLoseNothing() throws {
        let container = try container(for: [Tally.self])
        let setup = ModelContext(container)
        for index in 0..<20 { setup.insert(Tally(name: "t\(index)")) }
        try setup.save()
        let rounds = 40
        let group = DispatchGroup()
        let failures = Locked<[String]>([])
        for worker in 0..<3 {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    let context = ModelContext(container)
                    for round in 1...rounds {
                        for tally in try context.fetch(FetchDescriptor<Tally>()) {
                            switch worker {
                            case 0: tally.a = round
                            case 1: tally.b = round
                            default: tally.c = round
                            }
                        }
                        try context.save()
                    }
                } catch {
                    failures.withLock { $0.append("worker \(worker): \(error)") }
                }
            }.start()
        }
        group.wait()
        XCTAssertEqual(failures.withLock { $0 }, [])
        for tally in try ModelContext(container).fetch(FetchDescriptor<Tally>()) {
            XCTAssertEqual([tally.a, tally.b, tally.c], [rounds, rounds, rounds], tally.name)
        }
    }
}

extension ContextMergeTests {
    private func citizenContainer() throws -> ModelContainer {
        try container(for: [Citizen.self, Passport.self, Pet.self, Club.self], name: "citizens.store")
    }

    private func citizen(_ context: ModelContext, _ name: String) throws -> Citizen {
        try XCTUnwrap(context.fetch(FetchDescriptor<Citizen>(predicate: #Predicate { $0.name == name })).first)
    }

    private func club(_ context: ModelContext, _ name: String) throws -> Club {
        try XCTUnwrap(context.fetch(FetchDescriptor<Club>(predicate: #Predicate { $0.name == name })).first)
    }

    /// Two contexts change one many-to-many: each save adds and removes
    /// only what its context did (a save wrote its whole list, dropping the
    /// other context's addition).
    func testManyToManyChangesFromTwoContextsBothLand() throws {
        let container = try citizenContainer()
        let setup = ModelContext(container)
        setup.insert(Citizen(name: "ann"))
        setup.insert(Club(name: "chess"))
        setup.insert(Club(name: "go"))
        try setup.save()

        let one = ModelContext(container)
        let two = ModelContext(container)
        try club(one, "chess").members.append(try citizen(one, "ann"))
        let annTwo = try citizen(two, "ann")
        annTwo.clubs.append(try club(two, "go"))
        try two.save()
        try one.save()
        XCTAssertEqual(try citizen(ModelContext(container), "ann").clubs.map(\.name).sorted(), ["chess", "go"])
        XCTAssertEqual(try citizen(one, "ann").clubs.map(\.name).sorted(), ["chess", "go"], "read again after the save")
        two.processPendingChanges()
        XCTAssertEqual(annTwo.clubs.map(\.name).sorted(), ["chess", "go"])
    }

    /// A relationship to a model another save deleted is not written back,
    /// and a one-to-many the context changed is read again after its save.
    func testASaveNeitherRelinksDeletedTargetsNorKeepsStaleLists() throws {
        let container = try citizenContainer()
        let setup = ModelContext(container)
        let ann = Citizen(name: "ann")
        let bob = Citizen(name: "bob")
        setup.insert(ann)
        setup.insert(bob)
        ann.clubs = [Club(name: "chess"), Club(name: "go")]
        ann.pets = [Pet(name: "rex")]
        try setup.save()

        let one = ModelContext(container)
        let two = ModelContext(container)
        let annOne = try citizen(one, "ann")
        XCTAssertEqual(annOne.clubs.count, 2)
        annOne.clubs.append(Club(name: "bridge"))
        annOne.pets.append(Pet(name: "tom"))
        two.delete(try club(two, "chess"))
        try XCTUnwrap(citizen(two, "ann").pets.first).owner = try citizen(two, "bob")
        try two.save()
        try one.save()

        let fresh = try citizen(ModelContext(container), "ann")
        XCTAssertEqual(fresh.clubs.map(\.name).sorted(), ["bridge", "go"])
        XCTAssertEqual(annOne.clubs.map(\.name).sorted(), ["bridge", "go"])
        XCTAssertEqual(annOne.pets.map(\.name), ["tom"], "rex moved to bob in the other save")
        XCTAssertEqual(try citizen(one, "bob").pets.map(\.name), ["rex"])
    }
}

/// A model executor that is not a serial executor (a program may write
/// one): the actor runs on a serial stand-in over the same context.
final class PlainModelExecutor: ModelExecutor, @unchecked Sendable {
    let modelContext: ModelContext
    init(modelContext: ModelContext) { self.modelContext = modelContext }
}

actor PlainTripCounter: ModelActor {
    nonisolated let modelContainer: ModelContainer
    nonisolated let modelExecutor: any ModelExecutor

    init(container: ModelContainer) {
        modelContainer = container
        modelExecutor = PlainModelExecutor(modelContext: ModelContext(container))
    }

    func insertAndCount(_ name: String) throws -> Int {
        modelContext.insert(Trip(name: name, destination: "somewhere"))
        try modelContext.save()
        return try modelContext.fetchCount(FetchDescriptor<Trip>())
    }
}

extension ContextMergeTests {
    /// Inserting a model another live context holds (a trap before, as in
    /// SwiftData) inserts nothing; the next save says why and writes
    /// nothing.
    func testInsertingAnotherContextsModelFailsTheSave() throws {
        let container = try tripContainer()
        let owner = ModelContext(container)
        let trip = Trip(name: "Alps", destination: "Zermatt")
        owner.insert(trip)
        try owner.save()
        let other = ModelContext(container)
        other.insert(Trip(name: "Coast", destination: "Nice"))
        other.insert(trip)
        XCTAssertThrowsError(try other.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure)
            XCTAssertTrue("\(error)".contains("already belongs to another ModelContext"), "\(error)")
        }
        XCTAssertTrue(trip.modelContext === owner)
        XCTAssertEqual(try count(Trip.self, in: container), 1)
        other.rollback()
        try other.save()
    }

    /// A ModelActor whose executor is not serial runs (it trapped).
    func testAModelActorWithAPlainExecutorRuns() async throws {
        let container = try tripContainer()
        let counter = PlainTripCounter(container: container)
        let first = try await counter.insertAndCount("a")
        let second = try await counter.insertAndCount("b")
        XCTAssertEqual([first, second], [1, 2])
    }
}
