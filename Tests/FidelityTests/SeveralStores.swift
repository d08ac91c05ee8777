import Foundation
import Strata

// The models of SwiftData's introduction to configurations: trips, their
// bucket lists and lodgings in one store; people and their addresses in
// another.

@Model
final class Trip {
    var name: String
    var destination: String
    var startDate = Date()
    @Relationship(deleteRule: .cascade, inverse: \BucketListItem.trip)
    var bucketList: [BucketListItem] = []
    @Relationship(deleteRule: .cascade)
    var livingAccommodation: LivingAccommodations?

    init(name: String, destination: String) {
        self.name = name
        self.destination = destination
    }
}

@Model
final class BucketListItem {
    var title: String
    var isInPlan = false
    var trip: Trip?

    init(title: String) { self.title = title }
}

@Model
final class LivingAccommodations {
    var address: String
    var placeName: String
    @Relationship(inverse: \Trip.livingAccommodation) var trip: Trip?

    init(address: String, placeName: String) {
        self.address = address
        self.placeName = placeName
    }
}

@Model
final class Person {
    @Attribute(.unique) var name: String
    @Relationship(deleteRule: .cascade) var addresses: [Address]? = []

    init(name: String) { self.name = name }
}

@Model
final class Address {
    var street: String
    var city: String
    @Relationship(inverse: \Person.addresses) var person: Person?

    init(street: String, city: String) {
        self.street = street
        self.city = city
    }
}
