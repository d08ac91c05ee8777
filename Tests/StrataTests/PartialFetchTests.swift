import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// `propertiesToFetch` decodes only the named attributes (the rest load on
/// first access, from the record as the store holds it then), and
/// `relationshipKeyPathsForPrefetching` loads the named relationships'
/// targets in the fetch's read transaction.
final class PartialFetchTests: StoreTestCase {
    private func stocked() throws -> ModelContainer {
        let container = try container(for: [Gadget.self, Maker.self, Part.self])
        let context = ModelContext(container)
        let maker = Maker(name: "Acme", country: "NZ")
        context.insert(maker)
        for uid in 1...4 {
            let gadget = Gadget(uid: uid, score: uid * 10, name: "g\(uid)", rating: 1.5, flag: true, category: .active)
            gadget.note = "note \(uid)"
            gadget.size = uid
            gadget.maker = maker
            context.insert(gadget)
            for index in 0..<3 {
                let part = Part(label: "p\(uid).\(index)", weight: index)
                context.insert(part)
                part.gadget = gadget
            }
        }
        try context.save()
        return container
    }

    private func nameOnly() -> FetchDescriptor<Gadget> {
        var descriptor = FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.uid)])
        descriptor.propertiesToFetch = [\.name]
        return descriptor
    }

    func testOnlyTheNamedAttributesAreDecodedAndTheRestLoadOnFirstAccess() throws {
        let container = try stocked()
        let context = ModelContext(container)
        let gadgets = try context.fetch(nameOnly())
        XCTAssertEqual(gadgets.map(\.name), ["g1", "g2", "g3", "g4"])
        let entity = try XCTUnwrap(container.schema.entity(forType: Gadget.self))
        let field = { (name: String) in try XCTUnwrap(entity.propertiesByName[name]).field }
        // uid is sorted on; category is a non-optional enum (no placeholder);
        // optionals, Codable ones too, read as nil until loaded.
        let expected: Set<Int> = try Set(["score", "rating", "flag", "note", "size", "address"].map(field))
        let state = gadgets[1]._strataState
        XCTAssertEqual(Set((0..<entity.properties.count).filter { state.unloaded.contains($0) }), expected)
        XCTAssertEqual(state.unloaded.contains(try field("uid")), false)
        // Another context changes the record: the first read loads it as
        // the store holds it now; what was fetched stays as fetched.
        let other = ModelContext(container)
        let second = try XCTUnwrap(other.fetch(FetchDescriptor<Gadget>(predicate: #Predicate { $0.uid == 2 })).first)
        second.name = "renamed"
        second.note = "changed"
        try other.save()
        XCTAssertEqual(gadgets[1].name, "g2")
        XCTAssertEqual(gadgets[1].note, "changed")
        XCTAssertTrue(state.unloaded.isEmpty, "one read loads every attribute left out")
        XCTAssertEqual(gadgets[1].score, 20)
        XCTAssertEqual(gadgets[2].rating, 1.5)
        XCTAssertEqual(gadgets[2].size, 3)
        XCTAssertEqual(gadgets[3].flag, true)
        XCTAssertFalse(context.hasChanges, "loading is not a change")
    }

    func testAPredicateEvaluatedOnModelsLoadsWholeModels() throws {
        let container = try stocked()
        let context = ModelContext(container)
        var descriptor = nameOnly()
        // A computed property: the predicate runs on models, which would
        // read the attributes left out one model at a time.
        descriptor.predicate = #Predicate { $0.doubledScore > 50 }
        XCTAssertEqual(try context.withQuery(descriptor) { $0.skipping }, 0)
        XCTAssertEqual(try context.fetch(descriptor).map(\.uid), [3, 4])
        // The same fetch with a predicate on stored values leaves them out.
        descriptor.predicate = #Predicate { $0.score > 25 }
        XCTAssertNotEqual(try context.withQuery(descriptor) { $0.skipping }, 0)
    }

    func testEnumerateInRowOrderLeavesOutTheSameAttributes() throws {
        let container = try stocked()
        let context = ModelContext(container)
        var descriptor = FetchDescriptor<Gadget>()
        descriptor.propertiesToFetch = [\.uid]
        var seen: [Int: Bool] = [:]
        try context.enumerate(descriptor, batchSize: 2) { gadget in
            let unloaded = !gadget._strataState.unloaded.isEmpty
            seen[gadget.uid] = unloaded
            XCTAssertEqual(gadget.note, "note \(gadget.uid)")
        }
        XCTAssertEqual(seen, [1: true, 2: true, 3: true, 4: true])
    }

    func testAChangedPartialModelSavesWithItsOtherValuesAndKeysIntact() throws {
        let container = try stocked()
        let context = ModelContext(container)
        let gadgets = try context.fetch(nameOnly())
        // Written without reading: the setter loads the rest first.
        gadgets[0].rating = 9
        // Not touched at all before the save.
        gadgets[1].name = "second"
        try context.save()
        let check = ModelContext(container)
        let stored = try check.fetch(FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.uid)]))
        XCTAssertEqual(stored.map(\.rating), [9, 1.5, 1.5, 1.5])
        XCTAssertEqual(stored.map(\.name), ["g1", "second", "g3", "g4"])
        XCTAssertEqual(stored.map(\.score), [10, 20, 30, 40])
        XCTAssertEqual(stored.map(\.note), ["note 1", "note 2", "note 3", "note 4"])
        // The indexes still find them by the values left out.
        let byScore = try check.fetch(FetchDescriptor<Gadget>(predicate: #Predicate { $0.score == 20 }))
        XCTAssertEqual(byScore.map(\.uid), [2])
        let bySize = try check.fetch(FetchDescriptor<Gadget>(predicate: #Predicate { $0.size == 1 }))
        XCTAssertEqual(bySize.map(\.uid), [1])
    }

    private func flagOnly(in context: ModelContext) throws -> [Gadget] {
        var descriptor = FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.uid)])
        descriptor.propertiesToFetch = [\.flag]
        return try context.fetch(descriptor)
    }

    /// Saves a new note for gadget `uid` from a context of its own.
    private func changeNoteElsewhere(uid: Int, in container: ModelContainer) throws {
        let other = ModelContext(container)
        let same = try other.fetch(FetchDescriptor<Gadget>(predicate: #Predicate { $0.uid == uid }))
        same[0].note = "changed elsewhere"
        try other.save()
    }

    func testAChangeToAFetchedAttributeLeavesTheOthersToLoadWhenRead() throws {
        let container = try stocked()
        let context = ModelContext(container)
        let gadgets = try flagOnly(in: context)
        let leftOut = gadgets[1]._strataState.unloaded
        XCTAssertFalse(leftOut.isEmpty)
        gadgets[1].flag = false
        try context.save()
        // The save laid the one field over the stored record and decoded
        // none of the others into the model.
        XCTAssertEqual(gadgets[1]._strataState.unloaded, leftOut)
        // Read later, they are the store's values then.
        try changeNoteElsewhere(uid: 2, in: container)
        XCTAssertEqual(gadgets[1].note, "changed elsewhere")
        XCTAssertEqual(gadgets[1].score, 20)
        XCTAssertTrue(gadgets[1]._strataState.unloaded.isEmpty)
        let check = ModelContext(container)
        let stored = try check.fetch(FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.uid)]))
        XCTAssertEqual(stored.map(\.flag), [true, false, true, true])
        XCTAssertEqual(stored.map(\.note), ["note 1", "changed elsewhere", "note 3", "note 4"])
        XCTAssertEqual(stored.map(\.score), [10, 20, 30, 40])
        XCTAssertEqual(stored.map(\.name), ["g1", "g2", "g3", "g4"])
        XCTAssertEqual(stored.map(\.rating), [1.5, 1.5, 1.5, 1.5])
    }

    func testSettingAnAttributeLeftOutReadsNothingAndTheRestLoadWhenRead() throws {
        let container = try stocked()
        let rating = try XCTUnwrap(container.schema.entity(forType: Gadget.self)?.propertiesByName["rating"]).field
        let context = ModelContext(container)
        let gadgets = try flagOnly(in: context)
        let leftOut = gadgets[0]._strataState.unloaded
        XCTAssertTrue(leftOut.contains(rating))
        gadgets[0].rating = 9
        // The setter read no record: only the attribute set is loaded.
        XCTAssertEqual(gadgets[0]._strataState.unloaded, leftOut.subtracting(_FieldSet([rating])))
        XCTAssertEqual(gadgets[0].rating, 9)
        // The others load when read, as the store holds them then.
        try changeNoteElsewhere(uid: 1, in: container)
        XCTAssertEqual(gadgets[0].note, "changed elsewhere")
        XCTAssertEqual(gadgets[0].rating, 9)
        try context.save()
        let stored = try ModelContext(container).fetch(FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.uid)]))
        XCTAssertEqual(stored.map(\.rating), [9, 1.5, 1.5, 1.5])
        XCTAssertEqual(stored.map(\.note), ["changed elsewhere", "note 2", "note 3", "note 4"])
        XCTAssertEqual(stored.map(\.score), [10, 20, 30, 40])
    }

    #if !canImport(Darwin)
        func testWithAnUndoManagerSettingAnAttributeLeftOutLoadsTheOldValueFirst() throws {
            let container = try stocked()
            let context = ModelContext(container)
            let undo = UndoManager()
            context.undoManager = undo
            let gadgets = try flagOnly(in: context)
            undo.beginUndoGrouping()
            gadgets[0].rating = 9
            undo.endUndoGrouping()
            XCTAssertTrue(gadgets[0]._strataState.unloaded.isEmpty)
            undo.undo()
            XCTAssertEqual(gadgets[0].rating, 1.5)
            try context.save()
            let stored = try ModelContext(container).fetch(FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.uid)]))
            XCTAssertEqual(stored.map(\.rating), [1.5, 1.5, 1.5, 1.5])
        }
    #endif

    func testAPartialFetchNeedsNoRecordReadsForFilteredAttributes() throws {
        let container = try stocked()
        let context = ModelContext(container)
        var descriptor = nameOnly()
        descriptor.predicate = #Predicate { $0.score > 15 && $0.note != nil }
        let gadgets = try context.fetch(descriptor)
        XCTAssertEqual(gadgets.map(\.name), ["g2", "g3", "g4"])
        XCTAssertEqual(gadgets.map(\.note), ["note 2", "note 3", "note 4"])
    }

    func testPrefetchedTargetsAreRegisteredByTheFetch() throws {
        let container = try stocked()
        let partEntity = try XCTUnwrap(container.schema.entity(forType: Part.self))
        let makerEntity = try XCTUnwrap(container.schema.entity(forType: Maker.self))
        let plain = ModelContext(container)
        let unfetched = try plain.fetch(FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.uid)]))
        XCTAssertEqual(unfetched.count, 4)
        XCTAssertEqual(plain.registry[partEntity.ordinal].count, 0, "without prefetching, parts load on access")

        let context = ModelContext(container)
        var descriptor = FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.uid)])
        descriptor.relationshipKeyPathsForPrefetching = [\.parts, \.maker]
        let gadgets = try context.fetch(descriptor)
        XCTAssertEqual(context.registry[partEntity.ordinal].count, 12)
        XCTAssertEqual(context.registry[makerEntity.ordinal].count, 1)
        // The to-many's list of rows was read too: reading it reads nothing.
        let partsField = try XCTUnwrap(container.schema.entity(forType: Gadget.self)?.propertiesByName["parts"]).field
        guard case .rows(let listed)? = gadgets[0]._strataState.faults[partsField] else {
            let fault = String(describing: gadgets[0]._strataState.faults[partsField])
            return XCTFail("parts of a prefetched gadget are not listed: \(fault)")
        }
        XCTAssertEqual(listed.count, 3)
        XCTAssertEqual(gadgets[0].parts.map(\.label).sorted(), ["p1.0", "p1.1", "p1.2"])
        XCTAssertEqual(gadgets[3].maker?.name, "Acme")
        XCTAssertTrue(gadgets[3].parts.allSatisfy { $0.gadget === gadgets[3] })
    }
}
