import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

/// SwiftData's example of several configurations, compiled as written
/// there (only the paths differ), and used as an app would.
nonisolated final class SeveralStoresFidelityTests: FidelityTestCase {
    func testTripsInOneStorePeopleInAnother() throws {
        let tripsURL = URL(fileURLWithPath: directory.file("trip.store"))
        let peopleURL = URL(fileURLWithPath: directory.file("people.store"))
        func makeContainer() throws -> ModelContainer {
            let fullSchema = Schema([
                Trip.self,
                BucketListItem.self,
                LivingAccommodations.self,
                Person.self,
                Address.self,
            ])
            let trips = ModelConfiguration(
                schema: Schema([
                    Trip.self,
                    BucketListItem.self,
                    LivingAccommodations.self,
                ]),
                url: tripsURL,
                cloudKitContainerIdentifier: "com.example.trips"
            )
            let people = ModelConfiguration(
                schema: Schema([Person.self, Address.self]),
                url: peopleURL,
                cloudKitContainerIdentifier: "com.example.people"
            )
            return try ModelContainer(for: fullSchema, trips, people)
        }

        do {
            let context = ModelContext(try makeContainer())
            let trip = Trip(name: "Summer", destination: "Oslo")
            context.insert(trip)
            trip.bucketList.append(BucketListItem(title: "Fjord"))
            trip.livingAccommodation = LivingAccommodations(address: "Main St 1", placeName: "Inn")
            let person = Person(name: "Ana")
            context.insert(person)
            person.addresses?.append(Address(street: "Elm 2", city: "Bergen"))
            try context.save()
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: tripsURL.path))
        XCTAssertTrue(FileManager.default.fileExists(atPath: peopleURL.path))

        let container = try makeContainer()
        let context = ModelContext(container)
        let trip = try XCTUnwrap(
            try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == "Oslo" })).first)
        XCTAssertEqual(trip.bucketList.map(\.title), ["Fjord"])
        XCTAssertEqual(trip.livingAccommodation?.placeName, "Inn")
        let person = try XCTUnwrap(try context.fetch(FetchDescriptor<Person>()).first)
        XCTAssertEqual(person.addresses?.map(\.city), ["Bergen"])
        XCTAssertNotEqual(trip.persistentModelID.storeIdentifier, person.persistentModelID.storeIdentifier)

        // A unique person inserted again updates the stored one (upsert),
        // and deletes cascade inside their own store.
        let again = Person(name: "Ana")
        context.insert(again)
        again.addresses = [Address(street: "Oak 3", city: "Oslo")]
        context.delete(trip)
        try context.save()
        let reader = ModelContext(container)
        XCTAssertEqual(try reader.fetchCount(FetchDescriptor<Person>()), 1)
        XCTAssertEqual(try reader.fetchCount(FetchDescriptor<Trip>()), 0)
        XCTAssertEqual(try reader.fetchCount(FetchDescriptor<BucketListItem>()), 0)
        XCTAssertEqual(try reader.fetchCount(FetchDescriptor<LivingAccommodations>()), 0, "cascaded from the trip")
        XCTAssertEqual(try container.checkIntegrity().map(\.description), [])
    }
}
