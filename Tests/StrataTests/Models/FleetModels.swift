import Foundation
import Strata

// A hierarchy through three schema versions: V1 has no subclass (a flag
// marks trucks), V2 adds the `Truck` subclass (a lightweight stage), V3
// gives it an attribute more (lightweight too). The custom plan moves the
// flagged vehicles of V1 into `Truck` rows, as Apple's article on
// adopting inheritance describes for `isBusinessTrip`.

enum FleetV1: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    static var models: [any PersistentModel.Type] { [Vehicle.self, Depot.self] }

    @Model class Vehicle {
        @Attribute(.unique) var plate: String
        var isTruck: Bool = false
        var load: Int = 0
        var depot: Depot?
        init(plate: String, isTruck: Bool = false, load: Int = 0) {
            self.plate = plate
            self.isTruck = isTruck
            self.load = load
        }
    }

    @Model final class Depot {
        var name: String
        @Relationship(inverse: \Vehicle.depot) var vehicles: [Vehicle] = []
        init(name: String) { self.name = name }
    }
}

enum FleetV2: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Vehicle.self, Truck.self, Depot.self, Garage.self] }

    @Model class Vehicle {
        @Attribute(.unique) var plate: String
        var depot: Depot?
        init(plate: String) { self.plate = plate }
    }

    @Model final class Truck: Vehicle {
        var load: Int
        init(plate: String, load: Int) {
            self.load = load
            super.init(plate: plate)
        }
    }

    @Model final class Depot {
        var name: String
        @Relationship(inverse: \Vehicle.depot) var vehicles: [Vehicle] = []
        init(name: String) { self.name = name }
    }

    /// Parks vehicles without an inverse: the list is a join tree only.
    @Model final class Garage {
        var name: String
        var parked: [Vehicle] = []
        init(name: String) { self.name = name }
    }
}

enum FleetV3: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(3, 0, 0) }
    static var models: [any PersistentModel.Type] { [Vehicle.self, Truck.self, Depot.self, Garage.self] }

    @Model class Vehicle {
        @Attribute(.unique) var plate: String
        var depot: Depot?
        init(plate: String) { self.plate = plate }
    }

    @Model final class Truck: Vehicle {
        var load: Int
        var axles: Int = 2
        init(plate: String, load: Int) {
            self.load = load
            super.init(plate: plate)
        }
    }

    @Model final class Depot {
        var name: String
        @Relationship(inverse: \Vehicle.depot) var vehicles: [Vehicle] = []
        init(name: String) { self.name = name }
    }

    /// Parks vehicles without an inverse: the list is a join tree only.
    @Model final class Garage {
        var name: String
        var parked: [Vehicle] = []
        init(name: String) { self.name = name }
    }
}

/// V1 without its flag, as V2 stores vehicles: what a lightweight stage
/// that only adds a subclass starts from.
enum FleetV1Plain: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    static var models: [any PersistentModel.Type] { [Vehicle.self, Depot.self] }

    @Model class Vehicle {
        @Attribute(.unique) var plate: String
        var depot: Depot?
        init(plate: String) { self.plate = plate }
    }

    @Model final class Depot {
        var name: String
        @Relationship(inverse: \Vehicle.depot) var vehicles: [Vehicle] = []
        init(name: String) { self.name = name }
    }
}

enum FleetLightweightPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [FleetV1Plain.self, FleetV2.self, FleetV3.self] }
    static var stages: [MigrationStage] {
        [
            .lightweight(fromVersion: FleetV1Plain.self, toVersion: FleetV2.self),
            .lightweight(fromVersion: FleetV2.self, toVersion: FleetV3.self),
        ]
    }
}

/// Moves V1's flagged vehicles into `Truck` rows: `willMigrate` notes them
/// and deletes them; `didMigrate` inserts them again as trucks, in the
/// depot they were in.
enum FleetSubclassPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [FleetV1.self, FleetV2.self] }
    static var stages: [MigrationStage] { [stage] }

    nonisolated(unsafe) static var moving: [(plate: String, load: Int, depot: String?)] = []

    static let stage = MigrationStage.custom(
        fromVersion: FleetV1.self, toVersion: FleetV2.self,
        willMigrate: { context in
            moving = []
            for vehicle in try context.fetch(FetchDescriptor<FleetV1.Vehicle>(predicate: #Predicate { $0.isTruck })) {
                moving.append((vehicle.plate, vehicle.load, vehicle.depot?.name))
                context.delete(vehicle)
            }
            try context.save()
        },
        didMigrate: { context in
            let depots = try context.fetch(FetchDescriptor<FleetV2.Depot>())
            for moved in moving {
                let truck = FleetV2.Truck(plate: moved.plate, load: moved.load)
                context.insert(truck)
                truck.depot = depots.first { $0.name == moved.depot }
            }
            try context.save()
        })
}
