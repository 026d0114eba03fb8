"""Travel services: flights, hotels, activities (museums, tours, outdoors, day trips) and events.
Restaurants are not searched here: the trip's dinners come from a `dining` sub-mission (stages.dinners),
and `Restaurant` is how its options read in the trip.

One protocol per kind of service, and sample sources that answer from bundled data,
deterministically, so a travel mission runs offline and inside the Lambda layer (plain Python
data, no files). Several sources per kind overlap on purpose, as real search sites do, so a
coordinator has to merge and dedupe what its workers found. A real service (an airline API,
a hotel site, an events calendar) implements the same protocol and is added to `SOURCES`.

Unknown destinations answer with no results, as a real search would, rather than an error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from missions.core.capability.connectors import ConnectorRejected

KINDS = ("flights", "hotels", "activities", "events")
ACTIVITY_CATEGORIES = ("museum", "tour", "outdoors", "day_trip", "food")


@dataclass(frozen=True)
class TripQuery:
    """What every source is asked: where, from where, when, for how long and for how many."""

    destination: str  # a city, any case ("Paris")
    origin: str = "NYC"
    month: str = "May"
    days: int = 5
    travelers: int = 2

    @property
    def city(self) -> str:
        return self.destination.strip().lower()

    @property
    def nights(self) -> int:
        return max(1, self.days - 1)


@dataclass(frozen=True)
class Flight:
    id: str  # the flight number: the same flight found by two sources dedupes on it
    source: str
    airline: str
    origin: str
    destination: str
    stops: int
    via: str
    duration_hours: float
    departs: str
    price_usd: float  # per traveler, round trip

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "flight", **asdict(self)}


@dataclass(frozen=True)
class Hotel:
    id: str
    source: str
    name: str
    area: str
    nightly_usd: float
    rating: float  # 0..5
    near_metro: bool
    quiet: bool
    lodging: str  # "hotel" | "apartment"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "hotel", **asdict(self)}


@dataclass(frozen=True)
class Activity:
    id: str
    source: str
    name: str
    category: str  # one of ACTIVITY_CATEGORIES, or "event"
    area: str
    hours: float
    price_usd: float  # per traveler
    rating: float
    description: str
    months: tuple[str, ...] = ()  # events: when they run; empty: all year

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "activity", **asdict(self), "months": list(self.months)}


@dataclass(frozen=True)
class Restaurant:
    id: str
    source: str
    name: str
    area: str
    cuisine: str
    price_usd: float  # a dinner, per traveler
    rating: float
    vegetarian: bool  # a real vegetarian choice, not one salad
    table: str | None = None  # a free table's time, as the reservations service offered it

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "restaurant", **asdict(self)}

    @classmethod
    def from_dining(cls, option: dict[str, Any]) -> Restaurant:
        """One of a dining mission's options (capabilities.dining.ranking.card) as the trip shows it."""
        table = str(option.get("table") or "")
        return cls(
            id=str(option["id"]),
            source="dining",
            name=str(option["name"]),
            area=str(option.get("area") or option.get("address") or ""),
            cuisine=", ".join(option.get("cuisines") or []) or "restaurant",
            price_usd=float(option.get("price_per_person") or 0.0),
            rating=float(option.get("rating") or 0.0),
            vegetarian="vegetarian" in (option.get("dietary") or []),
            table=table if ":" in table else None,
        )


class FlightSearch(Protocol):
    name: str

    def search(self, trip: TripQuery) -> list[Flight]: ...


class HotelSearch(Protocol):
    name: str

    def search(self, trip: TripQuery) -> list[Hotel]: ...


class ActivitySearch(Protocol):
    """Things to do in a category ("museum", "day_trip", ...)."""

    name: str

    def search(self, trip: TripQuery, category: str) -> list[Activity]: ...


class EventCalendar(Protocol):
    """What is on during the trip's month (concerts, exhibitions, sport)."""

    name: str

    def search(self, trip: TripQuery) -> list[Activity]: ...


# --------------------------------------------------------------------------- bundled data
# Flights: (number, airline, stops, via, hours, departs, price per traveler, sources listing it)
_FLIGHTS: dict[str, list[tuple[str, str, int, str, float, str, float, str]]] = {
    "paris": [
        ("AF011", "Air France", 0, "", 7.5, "18:30", 520, "skyscanner kayak airline_direct"),
        ("DL264", "Delta", 0, "", 7.4, "19:05", 515, "skyscanner kayak airline_direct"),
        ("UA057", "United", 0, "", 7.6, "17:40", 610, "skyscanner airline_direct"),
        ("IB6250", "Iberia", 1, "Madrid", 10.5, "16:15", 455, "skyscanner kayak"),
        ("TP204", "TAP Air Portugal", 1, "Lisbon", 11.0, "21:00", 430, "kayak"),
    ],
    "rome": [
        ("AZ609", "ITA Airways", 0, "", 8.5, "17:55", 640, "skyscanner kayak airline_direct"),
        ("DL240", "Delta", 0, "", 8.6, "18:20", 700, "skyscanner airline_direct"),
        ("LH401", "Lufthansa", 1, "Frankfurt", 11.5, "16:00", 520, "skyscanner kayak"),
    ],
    "lisbon": [
        ("TP202", "TAP Air Portugal", 0, "", 6.8, "22:15", 480, "skyscanner kayak airline_direct"),
        ("UA066", "United", 0, "", 6.9, "19:30", 560, "skyscanner airline_direct"),
        ("IB6252", "Iberia", 1, "Madrid", 9.5, "17:10", 410, "kayak"),
    ],
}
FLIGHT_SOURCES = ("skyscanner", "kayak", "airline_direct")
_FLIGHT_FEE = {"skyscanner": 0.0, "kayak": 4.0, "airline_direct": -10.0}  # booking direct skips the agent's cut

# Hotels: (id, name, area, nightly, rating, near metro, quiet, lodging, sources)
_HOTELS: dict[str, list[tuple[str, str, str, float, float, bool, bool, str, str]]] = {
    "paris": [
        ("par-marais", "Hôtel Le Marais", "Le Marais", 205, 4.6, True, True, "hotel", "booking hotels_com"),
        ("par-stgermain", "Hôtel Saint-Germain", "Saint-Germain", 275, 4.7, True, True, "hotel", "booking"),
        ("par-montmartre", "Montmartre Hill Hotel", "Montmartre", 150, 4.1, True, False, "hotel", "booking hotels_com"),
        ("par-opera", "Grand Hôtel Opéra", "Opéra", 340, 4.8, True, False, "hotel", "hotels_com"),
        ("par-latin", "Latin Quarter Inn", "Latin Quarter", 165, 4.3, True, True, "hotel", "booking hotels_com"),
        ("par-canal", "Canal Saint-Martin loft", "Canal Saint-Martin", 125, 4.3, False, True, "apartment", "airbnb"),
    ],
    "rome": [
        ("rom-monti", "Hotel Monti", "Monti", 190, 4.5, True, True, "hotel", "booking hotels_com"),
        ("rom-trastevere", "Trastevere House", "Trastevere", 150, 4.4, False, False, "apartment", "airbnb"),
        ("rom-spagna", "Piazza di Spagna Suites", "Spagna", 320, 4.8, True, True, "hotel", "hotels_com"),
        ("rom-termini", "Termini Comfort", "Termini", 120, 3.9, True, False, "hotel", "booking"),
    ],
    "lisbon": [
        ("lis-chiado", "Chiado Boutique", "Chiado", 180, 4.6, True, True, "hotel", "booking hotels_com"),
        ("lis-alfama", "Alfama Terrace flat", "Alfama", 120, 4.5, False, True, "apartment", "airbnb"),
        ("lis-avenida", "Avenida Palace", "Baixa", 230, 4.7, True, False, "hotel", "hotels_com"),
    ],
}
HOTEL_SOURCES = ("booking", "hotels_com", "airbnb")

# Activities: (id, name, category, area, hours, price, rating, description, months or "")
_ACTIVITIES: dict[str, list[tuple[str, str, str, str, float, float, float, str, str]]] = {
    "paris": [
        ("par-louvre", "Louvre Museum", "museum", "Louvre", 3, 22, 4.8, "the Mona Lisa and 35,000 works", ""),
        (
            "par-orsay",
            "Musée d'Orsay",
            "museum",
            "Saint-Germain",
            2.5,
            16,
            4.8,
            "Impressionists in a railway station",
            "",
        ),
        ("par-orangerie", "Musée de l'Orangerie", "museum", "Louvre", 1.5, 12.5, 4.6, "Monet's Water Lilies", ""),
        ("par-pompidou", "Centre Pompidou", "museum", "Le Marais", 2.5, 15, 4.4, "modern art, rooftop view", ""),
        ("par-rodin", "Musée Rodin", "museum", "Invalides", 1.5, 14, 4.5, "sculpture garden", ""),
        ("par-montmartre-walk", "Montmartre walking tour", "tour", "Montmartre", 2.5, 25, 4.7, "artists' hill", ""),
        ("par-marais-walk", "Le Marais history walk", "tour", "Le Marais", 2, 20, 4.5, "mansions and squares", ""),
        ("par-seine-cruise", "Seine river cruise", "tour", "Eiffel Tower", 1, 18, 4.4, "the city from the river", ""),
        ("par-luxembourg", "Luxembourg Gardens", "outdoors", "Saint-Germain", 1.5, 0, 4.7, "a stroll and a chair", ""),
        ("par-canal-bike", "Bike along Canal Saint-Martin", "outdoors", "Canal Saint-Martin", 3, 35, 4.4, "", ""),
        ("par-giverny", "Day trip to Giverny", "day_trip", "Giverny", 8, 75, 4.8, "Monet's house and gardens", ""),
        ("par-versailles", "Day trip to Versailles", "day_trip", "Versailles", 7, 60, 4.6, "palace and gardens", ""),
        (
            "par-fontainebleau",
            "Day trip to Fontainebleau",
            "day_trip",
            "Fontainebleau",
            8,
            70,
            4.5,
            "castle, forest",
            "",
        ),
        ("par-food-walk", "Latin Quarter food walk", "food", "Latin Quarter", 3, 95, 4.6, "cheese, wine, pastry", ""),
    ],
    "rome": [
        ("rom-vatican", "Vatican Museums", "museum", "Vatican", 3.5, 25, 4.7, "the Sistine Chapel", ""),
        ("rom-borghese", "Galleria Borghese", "museum", "Villa Borghese", 2, 22, 4.8, "Bernini and Caravaggio", ""),
        ("rom-colosseum", "Colosseum and Forum tour", "tour", "Monti", 3, 40, 4.7, "ancient Rome", ""),
        ("rom-trastevere-walk", "Trastevere evening walk", "tour", "Trastevere", 2, 20, 4.5, "", ""),
        ("rom-appia", "Bike the Appian Way", "outdoors", "Appia Antica", 4, 45, 4.6, "", ""),
        ("rom-tivoli", "Day trip to Tivoli", "day_trip", "Tivoli", 8, 70, 4.6, "Villa d'Este gardens", ""),
        ("rom-pasta", "Pasta-making class", "food", "Campo de' Fiori", 3, 80, 4.8, "", ""),
    ],
    "lisbon": [
        ("lis-gulbenkian", "Gulbenkian Museum", "museum", "Avenidas Novas", 2.5, 14, 4.7, "", ""),
        ("lis-tiles", "National Tile Museum", "museum", "Xabregas", 1.5, 8, 4.6, "", ""),
        ("lis-alfama-walk", "Alfama walking tour", "tour", "Alfama", 2.5, 20, 4.7, "", ""),
        ("lis-tram28", "Tram 28 ride", "tour", "Baixa", 1, 3, 4.2, "", ""),
        ("lis-belem", "Belém riverside walk", "outdoors", "Belém", 2, 0, 4.5, "", ""),
        ("lis-sintra", "Day trip to Sintra", "day_trip", "Sintra", 8, 60, 4.8, "palaces in the hills", ""),
    ],
}
_EVENTS: dict[str, list[tuple[str, str, str, str, float, float, float, str, str]]] = {
    "paris": [
        ("par-nuit-musees", "Nuit des Musées", "event", "citywide", 3, 0, 4.6, "museums open at night", "May"),
        ("par-sainte-chapelle", "Concert at Sainte-Chapelle", "event", "Île de la Cité", 1.5, 45, 4.8, "", "May June"),
        ("par-roland-garros", "Roland-Garros", "event", "Auteuil", 5, 80, 4.5, "the French Open", "May June"),
        ("par-jazz", "Jazz on the Seine", "event", "Latin Quarter", 2, 35, 4.4, "", "June July"),
    ],
    "rome": [
        ("rom-opera", "Opera at the Baths of Caracalla", "event", "Aventino", 3, 70, 4.7, "", "June July August"),
        ("rom-internazionali", "Italian Open tennis", "event", "Foro Italico", 5, 60, 4.5, "", "May"),
    ],
    "lisbon": [
        ("lis-santos", "Santo António festival", "event", "Alfama", 4, 0, 4.6, "sardines and music", "June"),
    ],
}
ACTIVITY_SOURCES = ("attractions",)
EVENT_SOURCES = ("events",)


# --------------------------------------------------------------------------- sample sources


@dataclass(frozen=True)
class SampleFlights:
    name: str

    def search(self, trip: TripQuery) -> list[Flight]:
        fee = _FLIGHT_FEE.get(self.name, 0.0)
        return [
            Flight(number, self.name, airline, trip.origin, trip.destination, stops, via, hours, departs, price + fee)
            for number, airline, stops, via, hours, departs, price, sources in _FLIGHTS.get(trip.city, [])
            if self.name in sources.split()
        ]


@dataclass(frozen=True)
class SampleHotels:
    name: str

    def search(self, trip: TripQuery) -> list[Hotel]:
        return [
            Hotel(hid, self.name, name, area, nightly, rating, metro, quiet, lodging)
            for hid, name, area, nightly, rating, metro, quiet, lodging, sources in _HOTELS.get(trip.city, [])
            if self.name in sources.split()
        ]


def _activities(rows: list[tuple[Any, ...]], source: str) -> list[Activity]:
    return [
        Activity(aid, source, name, category, area, hours, price, rating, description, tuple(months.split()))
        for aid, name, category, area, hours, price, rating, description, months in rows
    ]


@dataclass(frozen=True)
class SampleAttractions:
    name: str = "attractions"

    def search(self, trip: TripQuery, category: str) -> list[Activity]:
        if category not in ACTIVITY_CATEGORIES:
            raise ConnectorRejected(f"unknown category '{category}' (known: {', '.join(ACTIVITY_CATEGORIES)})")
        return [a for a in _activities(_ACTIVITIES.get(trip.city, []), self.name) if a.category == category]


@dataclass(frozen=True)
class SampleEvents:
    name: str = "events"

    def search(self, trip: TripQuery) -> list[Activity]:
        month = trip.month.strip().capitalize()[:3]
        return [
            a
            for a in _activities(_EVENTS.get(trip.city, []), self.name)
            if not a.months or any(m.startswith(month) for m in a.months)
        ]


SOURCES: dict[str, dict[str, Any]] = {
    "flights": {name: SampleFlights(name) for name in FLIGHT_SOURCES},
    "hotels": {name: SampleHotels(name) for name in HOTEL_SOURCES},
    "activities": {name: SampleAttractions(name) for name in ACTIVITY_SOURCES},
    "events": {name: SampleEvents(name) for name in EVENT_SOURCES},
}


def destinations() -> list[str]:
    """Cities the bundled data covers (a real deployment's sources cover more)."""
    return sorted(_FLIGHTS)


def search(kind: str, source: str, trip: TripQuery, query: str = "") -> list[dict[str, Any]]:
    """One source's results as plain dicts; ConnectorRejected for a kind or source that does not exist."""
    if kind not in KINDS:
        raise ConnectorRejected(f"unknown kind '{kind}' (known: {', '.join(KINDS)})")
    found = SOURCES[kind].get(source)
    if found is None:
        raise ConnectorRejected(f"no {kind} source '{source}' (known: {', '.join(SOURCES[kind])})")
    results = found.search(trip, query) if kind == "activities" else found.search(trip)
    return [result.to_dict() for result in results]
