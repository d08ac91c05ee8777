import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// A save writes its changed models in row order (neighbouring rows share
/// leaves). Models changed in row order are taken as they are; otherwise
/// the order is found by counting when the rows lie close together and by
/// sorting when they do not. Each way must give every changed model once,
/// rows ascending, with rows of two entities that share numbers.
final class SaveOrderTests: StoreTestCase {
    func testChangedModelsComeInRowOrderWhetherCountedOrSorted() throws {
        let container = try container(for: [Trip.self])
        let context = ModelContext(container)
        let trips = (0..<200).map { Trip(name: "t\($0)", destination: "d") }
        let items = (0..<200).map { BucketListItem(title: "i\($0)", details: "", hasReservation: false, isInPlan: false) }
        for trip in trips { context.insert(trip) }
        for item in items { context.insert(item) }
        try context.save()
        // Close rows (counted): every trip and item, whose rows overlap.
        // Spread rows (sorted): every tenth trip only. Few rows (sorted):
        // three trips.
        // Each changed in row order (taken as it is) and backwards (counted
        // or sorted). Rows are numbered per entity: the trips and items
        // interleaved are in row order with each row twice (taken as they
        // are), one after the other they are not (counted).
        let spread: [any PersistentModel] = stride(from: 0, to: trips.count, by: 10).map { trips[$0] }
        let cases: [(String, [any PersistentModel])] = [
            ("close", trips + items),
            ("close backwards", (trips + items).reversed()),
            ("close interleaved", zip(trips, items).flatMap { [$0.0 as any PersistentModel, $0.1] }),
            ("spread", spread),
            ("spread backwards", spread.reversed()),
            ("few", Array(trips.prefix(3))),
            ("few backwards", trips.prefix(3).reversed()),
        ]
        for (label, models) in cases {
            for model in models {
                if let trip = model as? Trip { trip.destination = "changed \(label)" }
                if let item = model as? BucketListItem { item.details = "changed \(label)" }
            }
            let order = context.changedInRowOrder()
            XCTAssertEqual(order.count, models.count, label)
            let rows = order.map(\.state.rowID)
            XCTAssertEqual(rows, rows.sorted(), "\(label): rows ascending")
            XCTAssertEqual(
                Set(order.map { ObjectIdentifier($0.model) }), Set(models.map { ObjectIdentifier($0) }),
                "\(label): each once")
            for entry in order { XCTAssertTrue(entry.state === entry.model._strataState, label) }
            try context.save()
        }
        let fetched = try ModelContext(container).fetch(FetchDescriptor<Trip>())
        XCTAssertEqual(fetched.filter { $0.destination == "changed few backwards" }.count, 3)
        XCTAssertEqual(fetched.filter { $0.destination == "changed spread backwards" }.count, 19)
    }

    /// The changed models against a list of first changes,
    /// under random changes and removals (holes in the order, and their
    /// squeezing once they outnumber the models): the same models, in the
    /// order each was first changed since it last left.
    func testChangedModelsKeepTheOrderOfFirstChanges() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "ChangedModels"))
        let models = (0..<300).map { BucketListItem(title: "t\($0)", details: "", hasReservation: false, isInPlan: false) }
        for round in 0..<8 {
            var changed = ChangedModels()
            var reference: [ObjectIdentifier] = []
            // Few models: many removals and returns; many: long runs of holes.
            let pool = round % 2 == 0 ? 12 : models.count
            for step in 0..<4_000 {
                let model = models[Int.random(in: 0..<pool, using: &random)]
                let id = ObjectIdentifier(model)
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<6:
                    changed.insert(model)
                    if !reference.contains(id) { reference.append(id) }
                default:
                    let removed = changed.remove(model)
                    XCTAssertEqual(removed.map { ObjectIdentifier($0) }, reference.contains(id) ? id : nil)
                    reference.removeAll { $0 == id }
                }
                if step % 97 == 0 || step == 3_999 {
                    XCTAssertEqual(changed.values.map { ObjectIdentifier($0) }, reference, "round \(round), step \(step)")
                    XCTAssertEqual(changed.count, reference.count)
                    XCTAssertEqual(changed.isEmpty, reference.isEmpty)
                }
            }
            for model in models.prefix(pool) {
                XCTAssertEqual(changed.contains(model), reference.contains(ObjectIdentifier(model)))
            }
            // Emptied, every model's position is stale: none reads as held,
            // and each joins again once.
            changed.removeAll(keepingCapacity: true)
            XCTAssertTrue(changed.isEmpty)
            XCTAssertEqual(Array(changed.values).count, 0)
            XCTAssertFalse(models.contains { changed.contains($0) })
            for model in models.prefix(5) + models.prefix(5) { changed.insert(model) }
            XCTAssertEqual(changed.values.map { ObjectIdentifier($0) }, models.prefix(5).map { ObjectIdentifier($0) })
        }
    }
}
