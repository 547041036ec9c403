"""Images for the seams: blurred, downsampled levels, and bilinear samples at pixel positions.

:class:`ImagePyramid` caches one frame's levels; :func:`sample_at_pixels` reads an image
(at any level) at pixel positions of the calibrated image with the two-stage
gather-scatter sampler (differentiable in the positions).

Convention:
    Pixels at centres; a level at stride s covers the calibrated image's extent, so
    ``u_level = (u + 0.5) w / W - 0.5`` (the normalised ``(2u + 1) / W - 1``,
    ``align_corners=False``). See docs/conventions.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from bevviz.camera import Rig
from bevviz.checks import check_shape, field_error
from bevviz.samplers.gather_scatter import GatherResult, bilinear_taps, feature_table

__all__ = [
    "as_frames", "as_pyramids", "gaussian_blur", "ImagePyramid", "pixel_table", "sample_at_pixels", "Sampler"
]


#: A ``grid_sample``-compatible function ``(input, grid, mode, padding_mode, align_corners)``.
Sampler = Callable[..., torch.Tensor]



def gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur with reflect padding.

    Args:
        x: Images, shape (N, C, H, W).
        sigma: Standard deviation in pixels; <= 0.3 returns ``x`` unchanged.

    Returns:
        Blurred images, shape (N, C, H, W).
    """
    if sigma <= 0.3:
        return x
    r = max(1, int(math.ceil(3 * sigma)))
    r = min(r, (min(x.shape[-2:]) - 1))
    k = torch.exp(-0.5 * (torch.arange(-r, r + 1, dtype=x.dtype) / sigma) ** 2)
    k = k / k.sum()
    # Shifted weighted sums: much faster on CPU than a 1-channel conv2d.
    y = F.pad(x, (r, r, 0, 0), mode="reflect")
    w = x.shape[-1]
    acc = k[0] * y[..., 0:w]
    for i in range(1, 2 * r + 1):
        acc = acc + k[i] * y[..., i:i + w]
    y = F.pad(acc, (0, 0, r, r), mode="reflect")
    h = x.shape[-2]
    acc = k[0] * y[..., 0:h, :]
    for i in range(1, 2 * r + 1):
        acc = acc + k[i] * y[..., i:i + h, :]
    return acc



def _normalise_uv(uv: torch.Tensor, width: float, height: float) -> torch.Tensor:
    """Pixel (u, v) (..., 2) -> grid (x, y) (..., 2), ``align_corners=False``: g = (2u + 1) / W - 1."""
    return torch.stack([(2.0 * uv[..., 0] + 1.0) / width - 1.0, (2.0 * uv[..., 1] + 1.0) / height - 1.0], -1)



def pixel_table(image: torch.Tensor) -> torch.Tensor:
    """The gather-scatter feature table of one image: (h * w + 1, C), see
    :func:`bevviz.samplers.gather_scatter.feature_table` (build once, sample many times).

    Args:
        image: Image or feature map, shape (C, h, w).
    """
    return feature_table(image.unsqueeze(0))



def sample_at_pixels(image: torch.Tensor, uv: torch.Tensor, width: int, height: int,
                     sampler: Sampler | None = None, table: torch.Tensor | None = None) -> torch.Tensor:
    """Bilinear samples of one image at pixel positions of the calibrated image.

    By default this is the two-stage gather-scatter sampler of
    :mod:`bevviz.samplers.gather_scatter` (bilinear taps, then a weighted gather from the
    channels-last table), differentiable with respect to ``uv`` through the tap weights.

    Args:
        image: One image or feature map at any stride, shape (C, h, w).
        uv: Pixel coordinates of the calibrated (full-size) image, shape (P, 2).
        width: Calibrated image width W.
        height: Calibrated image height H.
        sampler: Optional ``grid_sample``-compatible function used instead (e.g. the
            ``F.grid_sample`` reference, for comparisons).
        table: :func:`pixel_table` of ``image``, to skip rebuilding it.

    Returns:
        Samples, shape (C, P); border padding.

    Convention:
        The image at stride covers the calibrated image's extent, so
        ``u_level = (u + 0.5) w / W - 0.5`` (equivalently the normalised ``(2u + 1) / W - 1``,
        ``align_corners=False``).
    """
    if sampler is not None:
        g = _normalise_uv(uv, float(width), float(height)).to(image.dtype).view(1, 1, -1, 2)
        out = sampler(image.unsqueeze(0), g, mode="bilinear", padding_mode="border", align_corners=False)
        return out[0, :, 0, :]
    c, h, w = image.shape
    uvl = torch.stack([(uv[:, 0] + 0.5) * (w / width) - 0.5, (uv[:, 1] + 0.5) * (h / height) - 0.5], -1)
    taps = bilinear_taps(uvl.to(image.dtype).unsqueeze(0), h, w, "border", False, "pixel")
    table = pixel_table(image) if table is None else table
    return GatherResult(taps.indices, taps.weights, taps.valid, table).values()[0].T



def as_frames(images: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]]) -> list[Mapping[str, np.ndarray]]:
    """One frame (camera name -> image) or several, as a list of frames.

    Several frames of the same rig (e.g. the samples of a nuScenes scene: the extrinsics are
    fixed to the ego frame, whatever the ego pose) give seams that objects hide in one frame
    but not in another.
    """
    if isinstance(images, Mapping):
        return [images]
    frames = list(images)
    if not frames or not all(isinstance(f, (Mapping, ImagePyramid)) for f in frames):
        raise field_error("images", type(images).__name__,
                          "must be a dict camera name -> image, or a non-empty list of such dicts")
    return frames



class ImagePyramid:
    """One frame's images, downsampled and blurred on demand and cached.

    Args:
        images: Camera name -> uint8 RGB image, shape (H, W, 3).

    Convention:
        A level at stride s is the whole image area-resized to (W // s, H // s) (pixel
        centres kept; OpenCV ``INTER_AREA`` on float32), then Gaussian-blurred with sigma in
        level pixels (reflect border). Sample it with coordinates normalised by the
        calibrated image size, as :mod:`bevviz.features` does.
    """

    def __init__(self, images: Mapping[str, np.ndarray]) -> None:
        if not isinstance(images, Mapping):
            raise field_error("images", type(images).__name__, "must be a dict camera name -> image")
        self.images = images
        self._cache: dict[tuple[str, int, float], torch.Tensor] = {}

    def _image(self, rig: Rig, name: str) -> np.ndarray:
        cam = rig[name]
        if name not in self.images:
            raise field_error("images", sorted(self.images), f"no image for camera {name}")
        img = np.asarray(self.images[name])
        check_shape(img, (cam.height, cam.width, 3), "image", name)
        if img.dtype != np.uint8:
            raise field_error("image dtype", str(img.dtype), "must be uint8 RGB", name)
        return img

    def level(self, rig: Rig, name: str, stride: int, blur: float) -> torch.Tensor:
        """Camera ``name``'s image at ``stride``, blurred by ``blur`` level pixels: (3, H // s, W // s)."""
        key = (name, int(stride), round(float(blur), 4))
        if key not in self._cache:
            img = self._image(rig, name).astype(np.float32) * np.float32(1.0 / 255.0)
            H, W = img.shape[:2]
            h, w = max(1, H // stride), max(1, W // stride)
            if (h, w) != (H, W):
                img = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
            if blur > 0.3:
                img = cv2.GaussianBlur(img, (0, 0), float(blur), borderType=cv2.BORDER_REFLECT)
            self._cache[key] = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))
        return self._cache[key]

    def levels(self, rig: Rig, names: Sequence[str], stride: int, blur: float) -> dict[str, torch.Tensor]:
        """:meth:`level` for several cameras, as a dict."""
        return {n: self.level(rig, n, stride, blur) for n in names}



def as_pyramids(images) -> list[ImagePyramid]:
    """Frames (see :func:`as_frames`) as :class:`ImagePyramid` objects (kept if they already are)."""
    if isinstance(images, ImagePyramid):
        return [images]
    if isinstance(images, Sequence) and images and all(isinstance(f, ImagePyramid) for f in images):
        return list(images)
    return [f if isinstance(f, ImagePyramid) else ImagePyramid(f) for f in as_frames(images)]
