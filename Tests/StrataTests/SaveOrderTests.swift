import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// A save writes its changed models in row order (neighbouring rows share
/// leaves). The order is found by counting when the rows lie close
/// together and by sorting otherwise; both must give every changed model
/// once, rows ascending, with rows of two entities that share numbers.
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
        let cases: [(String, [any PersistentModel])] = [
            ("close", trips + items),
            ("spread", stride(from: 0, to: trips.count, by: 10).map { trips[$0] }),
            ("few", Array(trips.prefix(3))),
        ]
        for (label, models) in cases {
            for model in models {
                if let trip = model as? Trip { trip.destination = "changed \(label)" }
                if let item = model as? BucketListItem { item.details = "changed \(label)" }
            }
            let order = context.changedInRowOrder()
            XCTAssertEqual(order.count, models.count, label)
            XCTAssertEqual(order.map(\.0), order.map(\.0).sorted(), "\(label): rows ascending")
            XCTAssertEqual(
                Set(order.map { ObjectIdentifier($0.1) }), Set(models.map { ObjectIdentifier($0) }), "\(label): each once")
            for (row, model) in order { XCTAssertEqual(row, model._strataState.rowID, label) }
            try context.save()
        }
        let fetched = try ModelContext(container).fetch(FetchDescriptor<Trip>())
        XCTAssertEqual(fetched.filter { $0.destination == "changed few" }.count, 3)
        XCTAssertEqual(fetched.filter { $0.destination == "changed spread" }.count, 19)
    }
}
