// Model inheritance as SwiftData apps write it since iOS 26: a base class
// that is not `final`, subclasses with `@available`, an init that sets the
// subclass's properties before `super.init`, a subclass of a subclass,
// relationships to the base that hold subclasses and a relationship a
// subclass adds. (Apple's sample names them Trip, BusinessTrip and
// PersonalTrip; other fidelity files already have a `Trip`.)
import Foundation
import Strata

nonisolated enum JourneyReason: String, Codable, CaseIterable {
    case family, vacation, other
}

@Model
class Journey {
    #Index<Journey>([\.destination], [\.start])
    @Attribute(.unique) var name: String
    var destination: String
    var start: Date
    @Relationship(deleteRule: .cascade, inverse: \Expense.journey) var expenses: [Expense] = []
    var traveler: Traveler?

    /// What every kind of journey shows in a list (overridden below, as
    /// Apple's sample overrides `color`).
    var badge: String { "journey" }

    init(name: String, destination: String, start: Date) {
        self.name = name
        self.destination = destination
        self.start = start
    }
}

@available(iOS 26, macOS 26, *)
@Model
class BusinessJourney: Journey {
    var perDiem: Double = 0.0
    var client: String?
    @Relationship(deleteRule: .cascade, inverse: \Meeting.journey) var meetings: [Meeting] = []

    override var badge: String { "business" }

    init(name: String, destination: String, start: Date, perDiem: Double, client: String? = nil) {
        self.perDiem = perDiem
        self.client = client
        super.init(name: name, destination: destination, start: start)
    }
}

@available(iOS 26, macOS 26, *)
@Model
final class ConferenceJourney: BusinessJourney {
    var conference: String

    init(name: String, destination: String, start: Date, conference: String) {
        self.conference = conference
        super.init(name: name, destination: destination, start: start, perDiem: 150)
    }
}

@available(iOS 26, macOS 26, *)
@Model
final class PersonalJourney: Journey {
    var reason: JourneyReason

    override var badge: String { "personal" }

    init(name: String, destination: String, start: Date, reason: JourneyReason) {
        self.reason = reason
        super.init(name: name, destination: destination, start: start)
    }
}

@Model
final class Expense {
    var amount: Double
    var journey: Journey?

    init(amount: Double) { self.amount = amount }
}

@Model
final class Meeting {
    var topic: String
    var journey: BusinessJourney?

    init(topic: String) { self.topic = topic }
}

@Model
final class Traveler {
    var name: String
    @Relationship(inverse: \Journey.traveler) var journeys: [Journey] = []

    init(name: String) { self.name = name }
}

/// A subclass that makes an inherited attribute unique when its base does
/// not: the two classes disagree on what is unique, which a container
/// refuses.
@Model
class Gauge {
    var label: String
    init(label: String) { self.label = label }
}

@Model
final class StrictGauge: Gauge {
    #Unique<StrictGauge>([\.label])
    var limit: Int
    init(label: String, limit: Int) {
        self.limit = limit
        super.init(label: label)
    }
}
