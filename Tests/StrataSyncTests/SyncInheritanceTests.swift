#if Sync
    import Foundation
    import Strata
    @testable import StrataSync
    import StrataTesting
    import XCTest

    @Model
    class Shipment {
        var code: String
        var carrier: Carrier?
        init(code: String) { self.code = code }
    }

    @Model
    final class ColdShipment: Shipment {
        var celsius: Double
        init(code: String, celsius: Double) {
            self.celsius = celsius
            super.init(code: code)
        }
    }

    @Model
    final class Carrier {
        var name: String
        @Relationship(inverse: \Shipment.carrier) var shipments: [Shipment] = []
        init(name: String) { self.name = name }
    }

    /// Sync carries each model's concrete class: a subclass's model
    /// arrives as that class, with its own attributes, in relationships
    /// to its base.
    final class SyncInheritanceTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Shipment.self, ColdShipment.self, Carrier.self] }

        func testASubclassModelArrivesAsItsClass() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            let carrier = Carrier(name: "Polar")
            context.insert(carrier)
            let plain = Shipment(code: "S1")
            let cold = ColdShipment(code: "S2", celsius: -18)
            for shipment in [plain, cold] {
                context.insert(shipment)
                shipment.carrier = carrier
            }
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()

            let contextB = ModelContext(b)
            let shipments = try contextB.fetch(FetchDescriptor<Shipment>(sortBy: [SortDescriptor(\.code)]))
            XCTAssertEqual(shipments.map { "\(type(of: $0))" }, ["Shipment", "ColdShipment"])
            XCTAssertEqual((shipments.last as? ColdShipment)?.celsius, -18)
            let carrierB = try XCTUnwrap(contextB.fetch(FetchDescriptor<Carrier>()).first)
            XCTAssertEqual(carrierB.shipments.map(\.code).sorted(), ["S1", "S2"])

            // A change and a delete of the subclass's model go back.
            let coldB = try XCTUnwrap(shipments.last as? ColdShipment)
            coldB.celsius = -20
            try contextB.save()
            try await syncB.syncNow()
            try await syncA.syncNow()
            let again = ModelContext(a)
            XCTAssertEqual(try again.fetch(FetchDescriptor<ColdShipment>()).map(\.celsius), [-20])
            again.delete(try XCTUnwrap(again.fetch(FetchDescriptor<ColdShipment>()).first))
            try again.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            XCTAssertEqual(try ModelContext(b).fetch(FetchDescriptor<Shipment>()).map(\.code), ["S1"])
            XCTAssertEqual(try b.checkIntegrity(), [])
        }
    }
#endif
