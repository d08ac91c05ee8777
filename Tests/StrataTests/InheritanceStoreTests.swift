import Foundation
import StrataEngine
import StrataTesting
import XCTest

@testable import Strata

/// A hierarchy in the store: migrations that add a subclass or an
/// attribute to one, a custom stage that moves rows into a new subclass,
/// history that names the concrete class, and the store tool's view of it.
final class InheritanceStoreTests: StoreTestCase {
    private func open(_ schema: any VersionedSchema.Type, plan: (any SchemaMigrationPlan.Type)? = nil) throws
        -> ModelContainer
    {
        try track(
            ModelContainer(
                for: Schema(versionedSchema: schema), migrationPlan: plan,
                configurations: [ModelConfiguration(url: storeURL("fleet.store"))]))
    }

    func testLightweightStagesAddASubclassAndAnAttributeToIt() throws {
        do {
            let context = ModelContext(try open(FleetV1Plain.self))
            let depot = FleetV1Plain.Depot(name: "North")
            context.insert(depot)
            for plate in ["A1", "A2"] {
                let vehicle = FleetV1Plain.Vehicle(plate: plate)
                context.insert(vehicle)
                vehicle.depot = depot
            }
            try context.save()
        }
        do {
            let context = ModelContext(try open(FleetV2.self, plan: FleetLightweightPlan.self))
            XCTAssertEqual(try context.fetch(FetchDescriptor<FleetV2.Vehicle>()).map(\.plate).sorted(), ["A1", "A2"])
            let depot = try XCTUnwrap(context.fetch(FetchDescriptor<FleetV2.Depot>()).first)
            let truck = FleetV2.Truck(plate: "T1", load: 12)
            context.insert(truck)
            truck.depot = depot
            try context.save()
        }
        let container = try open(FleetV3.self, plan: FleetLightweightPlan.self)
        let context = ModelContext(container)
        let all = try context.fetch(FetchDescriptor<FleetV3.Vehicle>(sortBy: [SortDescriptor(\.plate)]))
        XCTAssertEqual(all.map(\.plate), ["A1", "A2", "T1"])
        let truck = try XCTUnwrap(all.last as? FleetV3.Truck)
        XCTAssertEqual([truck.load, truck.axles], [12, 2], "the added attribute reads as its default")
        XCTAssertEqual(try context.fetch(FetchDescriptor<FleetV3.Depot>()).first?.vehicles.count, 3)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testACustomStageMovesRowsIntoANewSubclass() throws {
        do {
            let context = ModelContext(try open(FleetV1.self))
            let depot = FleetV1.Depot(name: "South")
            context.insert(depot)
            for (plate, isTruck, load) in [("C1", false, 0), ("T7", true, 30), ("T8", true, 40)] {
                let vehicle = FleetV1.Vehicle(plate: plate, isTruck: isTruck, load: load)
                context.insert(vehicle)
                vehicle.depot = depot
            }
            try context.save()
        }
        let container = try open(FleetV2.self, plan: FleetSubclassPlan.self)
        let context = ModelContext(container)
        let trucks = try context.fetch(FetchDescriptor<FleetV2.Truck>(sortBy: [SortDescriptor(\.plate)]))
        XCTAssertEqual(trucks.map(\.plate), ["T7", "T8"])
        XCTAssertEqual(trucks.map(\.load), [30, 40])
        XCTAssertEqual(trucks.map { $0.depot?.name }, ["South", "South"])
        let all = try context.fetch(FetchDescriptor<FleetV2.Vehicle>(sortBy: [SortDescriptor(\.plate)]))
        XCTAssertEqual(all.map { "\(type(of: $0))" }, ["Vehicle", "Truck", "Truck"])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testHistoryNamesTheConcreteClass() throws {
        let context = ModelContext(try open(FleetV2.self))
        let truck = FleetV2.Truck(plate: "H1", load: 5)
        let base: FleetV2.Vehicle = truck
        context.insert(base)
        try context.save()
        truck.load = 6
        try context.save()
        let changes = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).flatMap(\.changes)
        XCTAssertEqual(changes.map(\.changedPersistentIdentifier.entityName), ["Truck", "Truck"])
        guard case .update(let change)? = changes.last, let update = change as? DefaultHistoryUpdate<FleetV2.Truck> else {
            return XCTFail("the last change is not an update of a Truck: \(String(describing: changes.last))")
        }
        XCTAssertEqual(update.updatedAttributes.count, 1)
        XCTAssertTrue(update.updatedAttributes.first == \FleetV2.Truck.load)
    }

    func testTheStoreToolShowsAndChecksTheHierarchy() throws {
        let container = try open(FleetV2.self)
        let context = ModelContext(container)
        let depot = FleetV2.Depot(name: "East")
        context.insert(depot)
        for index in 0..<3 {
            let vehicle: FleetV2.Vehicle =
                index == 0 ? FleetV2.Vehicle(plate: "V\(index)") : FleetV2.Truck(plate: "V\(index)", load: index)
            context.insert(vehicle)
            vehicle.depot = depot
        }
        try context.save()
        try container.store.database.read { tx in
            let schema = try XCTUnwrap(StoreInspector.schemaText(tx))
            XCTAssertTrue(schema.contains("entity Truck (subclass of Vehicle)"), schema)
            XCTAssertEqual(try StoreInspector.checkRecords(tx), [])
            var lines: [String] = []
            try StoreInspector.dump(tx, entity: "Truck", json: false) { lines.append($0) }
            XCTAssertEqual(lines.count, 2)
            XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("Truck p") && $0.contains("load=") }, "\(lines)")
        }
    }

    /// A save that touches every class of a hierarchy (an insert of each,
    /// a change of a subclass's model, a delete of the base's, a to-one
    /// moved between them), crashed at each of its sync points: after
    /// power loss the store holds the state before the save or after it,
    /// whole, and checks clean.
    func testCrashAtEverySyncPointOfASaveAcrossAHierarchy() throws {
        let url = URL(fileURLWithPath: "/crash/fleet.store")
        let schema = Schema(versionedSchema: FleetV2.self)
        let base = MemoryFileSystem()
        do {
            let context = ModelContext(
                try ModelContainer(for: schema, configurations: [ModelConfiguration(url: url, fileSystem: base)]))
            let depot = FleetV2.Depot(name: "West")
            context.insert(depot)
            for index in 0..<20 {
                let vehicle: FleetV2.Vehicle =
                    index % 2 == 0 ? FleetV2.Vehicle(plate: "P\(index)") : FleetV2.Truck(plate: "P\(index)", load: index)
                context.insert(vehicle)
                vehicle.depot = depot
            }
            try context.save()
        }
        func state(_ fs: MemoryFileSystem) throws -> [String] {
            let container = try ModelContainer(for: schema, configurations: [ModelConfiguration(url: url, fileSystem: fs)])
            XCTAssertEqual(try container.checkIntegrity(), [])
            let context = ModelContext(container)
            return try context.fetch(FetchDescriptor<FleetV2.Vehicle>(sortBy: [SortDescriptor(\.plate)])).map { vehicle in
                let load = (vehicle as? FleetV2.Truck).map { " load \($0.load)" } ?? ""
                return "\(type(of: vehicle)) \(vehicle.plate)\(load) in \(vehicle.depot?.name ?? "none")"
            }
        }
        func save(_ fs: MemoryFileSystem) throws {
            let container = try ModelContainer(for: schema, configurations: [ModelConfiguration(url: url, fileSystem: fs)])
            let context = ModelContext(container)
            let all = try context.fetch(FetchDescriptor<FleetV2.Vehicle>(sortBy: [SortDescriptor(\.plate)]))
            let depot = FleetV2.Depot(name: "Harbour")
            context.insert(depot)
            context.insert(FleetV2.Vehicle(plate: "N1"))
            let truck = FleetV2.Truck(plate: "N2", load: 99)
            context.insert(truck)
            truck.depot = depot
            (all[1] as? FleetV2.Truck)?.load = 1_000
            all[3].depot = depot
            context.delete(all[0])
            try context.save()
        }
        try assertEveryCrashLeavesBeforeOrAfter(base, seeds: 3, state: state, save: save)
    }

    /// Another process's insert of a subclass's model refreshes a to-many
    /// to the base that this process holds (two stores on one file stand
    /// for two processes).
    func testAnotherProcessesSubclassInsertRefreshesAToManyToTheBase() throws {
        let url = storeURL("fleet.store")
        func open() throws -> ModelContainer {
            try ModelContainer(
                for: Schema(versionedSchema: FleetV2.self),
                configurations: [ModelConfiguration(url: url, fileSystem: POSIXFileSystem())])
        }
        let here = track(try open())
        let context = ModelContext(here)
        let depot = FleetV2.Depot(name: "Central")
        context.insert(depot)
        let van = FleetV2.Vehicle(plate: "VAN")
        context.insert(van)
        van.depot = depot
        let garage = FleetV2.Garage(name: "G")
        context.insert(garage)
        let parked = FleetV2.Truck(plate: "PARKED", load: 1)
        garage.parked = [van, parked]
        try context.save()
        XCTAssertEqual(depot.vehicles.map(\.plate), ["VAN"])
        XCTAssertEqual(garage.parked.map(\.plate), ["VAN", "PARKED"])

        let there = ModelContext(try open())
        let theirDepot = try XCTUnwrap(there.fetch(FetchDescriptor<FleetV2.Depot>()).first)
        let truck = FleetV2.Truck(plate: "TRK", load: 3)
        there.insert(truck)
        truck.depot = theirDepot
        try there.save()

        // The next call into the store catches up with the other save.
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<FleetV2.Vehicle>()), 3)
        XCTAssertEqual(depot.vehicles.map(\.plate).sorted(), ["TRK", "VAN"])
        XCTAssertTrue(depot.vehicles.contains { $0 is FleetV2.Truck })

        // The other process deletes the truck by predicate: the depot's row
        // is not written, and its to-many here refreshes because a row of
        // the class it leads to (through a subclass) changed.
        try there.delete(model: FleetV2.Truck.self, where: #Predicate { $0.plate == "TRK" })
        try there.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<FleetV2.Vehicle>()), 2)
        XCTAssertEqual(depot.vehicles.map(\.plate), ["VAN"])

        // The other process moves a truck to another depot without
        // loading the one it leaves: that depot's row is not written, and
        // its list here refreshes because a row of a class below the one
        // it leads to changed.
        let south = FleetV2.Depot(name: "South")
        there.insert(south)
        try there.save()
        let mover = FleetV2.Truck(plate: "MOVER", load: 2)
        context.insert(mover)
        mover.depot = depot
        try context.save()
        XCTAssertEqual(depot.vehicles.map(\.plate).sorted(), ["MOVER", "VAN"])
        let elsewhere = ModelContext(try open())
        let moving = try XCTUnwrap(
            elsewhere.fetch(FetchDescriptor<FleetV2.Truck>(predicate: #Predicate { $0.plate == "MOVER" })).first)
        moving.depot = try XCTUnwrap(
            elsewhere.fetch(FetchDescriptor<FleetV2.Depot>(predicate: #Predicate { $0.name == "South" })).first)
        try elsewhere.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<FleetV2.Depot>()), 2)
        XCTAssertEqual(depot.vehicles.map(\.plate), ["VAN"])

        // A to-many without an inverse holds only a join: when the other
        // process deletes a truck it holds, the garage's row is not
        // written, and its list here refreshes because a row of a class
        // below the one it leads to changed.
        try there.delete(model: FleetV2.Truck.self, where: #Predicate { $0.plate == "PARKED" })
        try there.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<FleetV2.Vehicle>()), 2)
        XCTAssertEqual(garage.parked.map(\.plate), ["VAN"])
    }

    /// A subclass's own and inherited properties are observed, each on
    /// its own.
    func testASubclassModelIsObservedPropertyByProperty() throws {
        let truck = FleetV2.Truck(plate: "OBS", load: 1)
        let loadChanged = LockedFlag()
        withObservationTracking {
            _ = truck.load
        } onChange: {
            loadChanged.set()
        }
        let plateChanged = LockedFlag()
        withObservationTracking {
            _ = truck.plate
        } onChange: {
            plateChanged.set()
        }
        truck.plate = "OBS-2"
        XCTAssertTrue(plateChanged.value)
        XCTAssertFalse(loadChanged.value, "an inherited property's change is not the subclass's own")
        truck.load = 2
        XCTAssertTrue(loadChanged.value)
    }

    /// Damage a hierarchy can meet: a record under a row id outside its
    /// class's range refuses the store at open, naming the class; an
    /// identifier of a row of no class finds no model. Typed errors, never
    /// a trap.
    func testDamagedRowIdsOfAHierarchyAreReportedNotTrapped() throws {
        let container = try open(FleetV2.self)
        let context = ModelContext(container)
        let truck = FleetV2.Truck(plate: "T", load: 1)
        context.insert(truck)
        try context.save()
        let truckRow = truck._strataState.rowID
        XCTAssertGreaterThan(truckRow, Int64(1) << 48, "a subclass's row carries its tag")
        let truckTree = Store.treeName(entityName: "Truck")
        // A Truck record copied under a row whose tag no class has.
        let stray = (Int64(32_700) << 48) | 5
        try container.store.database.write { tx in
            let record = try XCTUnwrap(try tx.get(RowKey.encode(truckRow), in: tx.tree(truckTree)))
            try tx.put(RowKey.encode(stray), record, in: tx.tree(truckTree))
        }
        XCTAssertThrowsError(
            try ModelContainer(
                for: Schema(versionedSchema: FleetV2.self),
                configurations: [ModelConfiguration(url: storeURL("fleet.store"), fileSystem: POSIXFileSystem())])
        ) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .corruptRecord, "\(error)")
            XCTAssertTrue("\(error)".contains("Truck"), "\(error)")
        }
        try container.store.database.write { tx in try tx.delete(RowKey.encode(stray), in: tx.tree(truckTree)) }

        // Identifiers of rows of no class, or of another class's range.
        let fresh = ModelContext(container)
        XCTAssertTrue(fresh.model(for: PersistentIdentifier(entityName: "Truck", rowID: stray)) is MissingModel)
        let vehicle: FleetV2.Vehicle? = try fresh.existingModel(for: PersistentIdentifier(entityName: "Vehicle", rowID: stray))
        XCTAssertNil(vehicle)
        let misfiled: FleetV2.Truck? = try fresh.existingModel(for: PersistentIdentifier(entityName: "Truck", rowID: 1))
        XCTAssertNil(misfiled)
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<FleetV2.Vehicle>()), 1)
    }
}

@Model class Cargo {
    var label: String
    var ship: Ship?
    init(label: String) { self.label = label }
}

@Model final class ColdCargo: Cargo {
    var celsius: Double
    init(label: String, celsius: Double) {
        self.celsius = celsius
        super.init(label: label)
    }
}

@Model final class Ship {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Cargo.ship) var cargo: [Cargo] = []
    init(name: String) { self.name = name }
}

/// A cascade from a class outside a hierarchy reaches the subclass rows of
/// a relationship to its base without loading them, and a context that
/// holds one of those models sees it deleted.
final class InheritanceCascadeTests: StoreTestCase {
    func testACascadeDeletesUnloadedSubclassRows() throws {
        let container = try container(for: [Ship.self, Cargo.self, ColdCargo.self])
        let loading = ModelContext(container)
        let ship = Ship(name: "Aurora")
        loading.insert(ship)
        for cargo in [Cargo(label: "crates"), ColdCargo(label: "fish", celsius: -20), ColdCargo(label: "ice", celsius: -5)] {
            loading.insert(cargo)
            cargo.ship = ship
        }
        try loading.save()

        let holder = ModelContext(container)
        let fish = try XCTUnwrap(holder.fetch(FetchDescriptor<ColdCargo>(predicate: #Predicate { $0.label == "fish" })).first)
        let deleting = ModelContext(container)
        let stored = try XCTUnwrap(deleting.fetch(FetchDescriptor<Ship>()).first)
        XCTAssertEqual(deleting.registeredModel(for: fish.persistentModelID) as ColdCargo?, nil, "the cargo is not loaded")
        deleting.delete(stored)
        try deleting.save()

        let fresh = ModelContext(container)
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<Cargo>()), 0, "every class's rows went with the ship")
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<ColdCargo>()), 0)
        XCTAssertEqual(try holder.fetchCount(FetchDescriptor<ColdCargo>()), 0)
        XCTAssertTrue(fish.isDeleted, "the holding context merged the delete of a subclass row")
        XCTAssertEqual(try container.checkIntegrity(), [])
    }
}
