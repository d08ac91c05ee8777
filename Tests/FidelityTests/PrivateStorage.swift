// Private stored properties behind public computed wrappers, properties
// named like framework members, attributes and comments in any order.
import Foundation
import Strata

@Model
public final class Habit {
    /// Unique, and the first attribute.
    @Attribute(.unique) public var slug: String
    public var title: String
    // The enum is stored by its raw value.
    private var frequencyRaw: String = Frequency.daily.rawValue
    private var _completions: [Date] = []
    public var description: String = ""
    public var type: String = "habit"
    public var order: Int = 0
    public var value: Double = 0

    public enum Frequency: String, Codable, Sendable { case daily, weekly }

    public var frequency: Frequency {
        get { Frequency(rawValue: frequencyRaw) ?? .daily }
        set { frequencyRaw = newValue.rawValue }
    }

    public var completions: [Date] {
        get { _completions.sorted() }
        set { _completions = newValue }
    }

    public init(slug: String, title: String, frequency: Frequency = .daily) {
        self.slug = slug
        self.title = title
        self.frequencyRaw = frequency.rawValue
    }

    public func complete(on date: Date) { _completions.append(date) }
}

@ModelActor
public actor HabitImporter {
    public func importHabits(_ slugs: [String]) throws -> Int {
        for slug in slugs { modelContext.insert(Habit(slug: slug, title: slug.capitalized)) }
        try modelContext.save()
        return try modelContext.fetchCount(FetchDescriptor<Habit>())
    }
}
