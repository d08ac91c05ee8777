// A data layer written the way a new Xcode 26 app target compiles it:
// default main-actor isolation and approachable concurrency (the
// FidelityMainActor targets), and the same file in Swift 5 and 6 without
// them. A descriptor kept in a `static let`, a model actor that fetches
// and reads models, `propertiesToFetch` inside the actor, the actor's
// `subscript(_:as:)`, history read in the actor.
import Foundation
import Strata

/// A value type stored as an attribute. Under default main-actor isolation
/// its `Codable` conformance would be main-actor isolated, and a model's
/// storage (SwiftData's as Strata's) is not; such apps declare it
/// `nonisolated`, as here.
nonisolated struct GeoPoint: Codable, Hashable {
    var latitude: Double
    var longitude: Double
}

@Model
final class Location {
    var name: String
    var accessDate: Date
    var point: GeoPoint
    var kind: Kind = Kind.city
    var visits: [Visit]? = []

    enum Kind: String, Codable, CaseIterable { case city, park, museum }

    /// The descriptor the app's lists use, kept in a `static let` (its key
    /// path must be Sendable).
    static let recent = FetchDescriptor<Location>(sortBy: [SortDescriptor(\.accessDate, order: .reverse)])
    static let parks = #Predicate<Location> { $0.kind.rawValue == "park" }

    init(name: String, accessDate: Date = .now, point: GeoPoint, kind: Kind = .city) {
        self.name = name
        self.accessDate = accessDate
        self.point = point
        self.kind = kind
    }
}

@Model
final class Visit {
    var note: String
    var location: Location?
    init(note: String) { self.note = note }
}

/// The app's background service: fetches and changes models off the main
/// actor and hands identifiers back.
@ModelActor
actor LocationService {
    func add(_ name: String, kind: Location.Kind, daysAgo: Int) throws -> PersistentIdentifier {
        let location = Location(
            name: name, accessDate: Date(timeIntervalSinceReferenceDate: Double(1_000_000 - daysAgo * 86_400)),
            point: GeoPoint(latitude: 1, longitude: Double(daysAgo)), kind: kind)
        modelContext.insert(location)
        location.visits?.append(Visit(note: "first visit to \(name)"))
        try modelContext.save()
        return location.persistentModelID
    }

    func recentNames() throws -> [String] {
        try modelContext.fetch(Location.recent).map(\.name)
    }

    func parkNames() throws -> [String] {
        var descriptor = FetchDescriptor<Location>(predicate: Location.parks, sortBy: [SortDescriptor(\.name)])
        descriptor.propertiesToFetch = [\.name, \.kind]
        descriptor.relationshipKeyPathsForPrefetching = [\.visits]
        return try modelContext.fetch(descriptor).map(\.name)
    }

    func rename(_ id: PersistentIdentifier, to name: String) throws -> Bool {
        guard let location = self[id, as: Location.self] else { return false }
        location.name = name
        try modelContext.save()
        return true
    }

    func longitude(of id: PersistentIdentifier) -> Double? {
        self[id, as: Location.self]?.point.longitude
    }

    func historyCount() throws -> Int {
        try modelContext.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).count
    }
}
