import Foundation
import Strata

// `swift run trips [STORE]`: opens (or creates) a Trips store — at STORE, or
// at the default location — adds a few trips, and lists the upcoming ones
// sorted by start date.

let arguments = CommandLine.arguments.dropFirst()
let configuration: ModelConfiguration
if let path = arguments.first {
    configuration = ModelConfiguration(url: URL(fileURLWithPath: path))
} else {
    configuration = ModelConfiguration("Trips")
}

do {
    let container = try ModelContainer(for: Trip.self, configurations: configuration)
    let context = ModelContext(container)
    let before = try context.fetchCount(FetchDescriptor<Trip>())

    let day: TimeInterval = 86_400
    // Trips start and end on day boundaries, and Trip is unique by name
    // and dates: running the example again the same day finds them stored
    // and adds nothing. (Inserting one again would upsert it: the stored
    // trip would take the new one's values and relationships, and its old
    // bucket list item and accommodation would be left without a trip.)
    let now = Calendar(identifier: .gregorian).startOfDay(for: .now)
    let samples: [(String, String, Double, Double)] = [
        ("Hiking in the Alps", "Zermatt", 10, 17),
        ("Food tour", "Lisbon", 30, 34),
        ("Ski week", "Whistler", 90, 97),
        ("Last summer", "Crete", -120, -110),
    ]
    for (name, destination, start, end) in samples {
        let startDate = now.addingTimeInterval(start * day)
        let endDate = now.addingTimeInterval(end * day)
        let stored = FetchDescriptor<Trip>(
            predicate: #Predicate { $0.name == name && $0.startDate == startDate && $0.endDate == endDate })
        if try context.fetchCount(stored) > 0 { continue }
        let trip = Trip(
            name: name, destination: destination,
            startDate: startDate, endDate: endDate)
        trip.bucketList.append(BucketListItem(title: "See \(destination)", details: "", hasReservation: false, isInPlan: true))
        trip.livingAccommodation = LivingAccommodation(address: "1 Main Street, \(destination)", placeName: "Guest house")
        context.insert(trip)
    }
    try context.save()

    let upcomingTrips = FetchDescriptor<Trip>(
        predicate: #Predicate { $0.startDate > now },
        sortBy: [.init(\.startDate)]
    )
    let upcoming = try context.fetch(upcomingTrips)
    let total = try context.fetchCount(FetchDescriptor<Trip>())
    print("Store: \(configuration.url.path)")
    print("Added \(total - before) trips (\(before) were stored before, \(total) now).")
    print("Upcoming trips, soonest first:")
    let format = Date.FormatStyle(date: .abbreviated, time: .omitted)
    for trip in upcoming {
        let stay = trip.livingAccommodation.map { " — staying at \($0.placeName)" } ?? ""
        print("  \(trip.startDate.formatted(format))  \(trip.name) in \(trip.destination)\(stay)")
    }
} catch {
    FileHandle.standardError.write(Data("trips: \(error)\n".utf8))
    exit(1)
}
